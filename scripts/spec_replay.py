#!/usr/bin/env python3
"""Replays the n-gram drafting rule over recorded greedy outputs: steps counted, not timed.

One job at a time and greedy, which steps a speculative run takes is a function of the job's
prompt and output token ids alone (speculation changes no output), so a drafting rule can be
judged without this host's noise. `collect` records those ids from a running `conveyor serve`
(any speculative config: the outputs are the same); `replay` walks each job as the scheduler
would (engine/speculation.cpp: propose_ngram, draft_budget, spec_history; one decoding sequence,
threshold 1 / (F + 1)) and prints verifications V, drafted D, accepted A and decode steps S, and
the decode part's modelled speed-up (N - jobs) / (S + r D) for a verification's extra row costing
r one-row steps. This mirrors the engine's rule by hand (keep the two in step): with the first 12
grounded jobs, the counts were checked equal to a served run's spec-decode counters (`conveyor
bench --num-prompts 12 --max-concurrency 1 --temperature 0`, docs/benchmarks.md).

    conveyor serve --model M --speculative-config '{"method":"none"}' --no-journal ... &
    # collect uses the Python client, which needs pyzmq: the venv setup.sh creates has it
    .venv/bin/python scripts/spec_replay.py collect --router tcp://127.0.0.1:5555 --pub tcp://127.0.0.1:5556 \\
        --http-port 8000 --jobs 50 --out /tmp/grounded-ids.json
    python3 scripts/spec_replay.py replay /tmp/grounded-ids.json --jobs 12,50 --rule vote,latest
"""
import argparse
import json
import os
import sys
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DECAY, RETRY = 0.8, 16  # engine/speculation.hpp: spec_history_decay, spec_retry_steps
VOTE_NUM, VOTE_DEN, PER_MATCH_TOKEN = 3, 5, 2  # ngram_vote_num / _den, ngram_draft_per_match_token


def occurrences(toks, min_n, max_n):
    """The longest n in [min_n, max_n] whose suffix occurs earlier, and where each occurrence's
    continuation starts, latest first."""
    size = len(toks)
    for n in range(min(max_n, size - 1), min_n - 1, -1):
        suffix = toks[size - n:]
        hits = [i + n for i in range(size - n - 1, -1, -1) if toks[i:i + n] == suffix]
        if hits:
            return n, hits
    return 0, []


def propose(toks, min_n, max_n, k, rule):
    n, alive = occurrences(toks, min_n, max_n)
    if not alive or k <= 0:
        return []
    if rule == "latest":  # the rule before the vote: the latest occurrence's next k tokens
        return toks[alive[0]:alive[0] + k]
    out = []
    for step in range(min(k, PER_MATCH_TOKEN * n)):
        votes = [toks[f + step] for f in alive if f + step < len(toks)]
        if not votes or votes.count(votes[0]) * VOTE_DEN < len(votes) * VOTE_NUM:
            break
        out.append(votes[0])
        alive = [f for f in alive if f + step < len(toks) and toks[f + step] == votes[0]]
    return out


def budget(accepted, reached, idle, cap, threshold):
    p, n = (accepted + 1.0) / (reached + 2.0), 0
    chance = p
    while n < cap and chance > threshold:
        n, chance = n + 1, chance * p
    return 1 if n == 0 and cap > 0 and idle >= RETRY else n


def replay(jobs, rule, k, min_n, max_n, fixed_cost):
    v = d = a = steps = 0
    threshold = 1.0 / (fixed_cost + 1.0)
    for job in jobs:
        prompt, out, max_tokens = job["prompt"], job["output"], job["max_tokens"]
        accepted = reached = 0.0
        idle, pos = 0, 1  # the prompt pass gives the first token
        while pos < len(out):
            steps += 1
            want = budget(accepted, reached, idle, min(k, max_tokens - pos - 1), threshold)
            drafts = propose(prompt + out[:pos], min_n, max_n, want, rule) if want > 0 else []
            if not drafts:
                idle, pos = idle + 1, pos + 1
                continue
            got = 0
            while got < len(drafts) and pos + got < len(out) and out[pos + got] == drafts[got]:
                got += 1
            accepted = accepted * DECAY + got
            reached = reached * DECAY + got + (1 if got < len(drafts) else 0)
            idle = 0
            v, d, a, pos = v + 1, d + len(drafts), a + got, pos + got + 1
    return v, d, a, steps


def post(port, path, body):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def collect(args):
    sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
    from conveyor_client import Client
    with open(args.dataset) as f:
        jobs = [json.loads(line) for line in f if line.strip()][:args.jobs]
    out = []
    with Client(router=args.router, pub=args.pub) as c:
        for j in jobs:
            ids = post(args.http_port, "/tokenize", {"messages": j["messages"]})["tokens"]
            job_id = c.submit(prompt_tokens=ids, max_tokens=j["max_tokens"], temperature=0)
            toks = []
            for ev in c.stream(job_id, timeout=600):
                if ev.get("kind") == "tokens":
                    toks.extend(ev["token_ids"])
                elif ev.get("kind") == "error":
                    sys.exit("job %s failed: %s" % (j["id"], ev))
            out.append({"id": j["id"], "max_tokens": j["max_tokens"], "prompt": ids, "output": toks})
            print("%s: %d prompt tokens, %d output" % (j["id"], len(ids), len(toks)), file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(out, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="record prompt and greedy output ids from a running server")
    c.add_argument("--router", required=True)
    c.add_argument("--pub", required=True)
    c.add_argument("--http-port", type=int, required=True)
    c.add_argument("--dataset", default=os.path.join(ROOT, "tools", "bench", "data", "grounded.jsonl"))
    c.add_argument("--jobs", type=int, default=50)
    c.add_argument("--out", required=True)
    r = sub.add_parser("replay", help="count the steps a drafting rule takes over recorded outputs")
    r.add_argument("file")
    r.add_argument("--jobs", default="12", help="comma-separated: the first N jobs of the file")
    r.add_argument("--rule", default="vote", help="comma-separated: vote (conveyor's), latest (the rule before it)")
    r.add_argument("--k", type=int, default=8, help="num_speculative_tokens")
    r.add_argument("--min", type=int, default=1, help="prompt_lookup_min")
    r.add_argument("--max", type=int, default=5, help="prompt_lookup_max")
    r.add_argument("--fixed-cost", type=float, default=6.0, help="fixed_cost_tokens")
    r.add_argument("--r", default="0.21,0.15", help="comma-separated costs of a verification's extra row")
    args = ap.parse_args()
    if args.cmd == "collect":
        return collect(args)
    with open(args.file) as f:
        recorded = json.load(f)
    costs = [float(x) for x in args.r.split(",")]
    print("| rule | jobs | output tokens | V | D | A | S | %s |" % " | ".join("ratio at r %.2f" % x for x in costs))
    print("|---|---|---|---|---|---|---|%s" % ("---|" * len(costs)))
    for rule in args.rule.split(","):
        for n in [int(x) for x in args.jobs.split(",")]:
            jobs = recorded[:n]
            tokens = sum(len(j["output"]) for j in jobs)
            v, d, a, s = replay(jobs, rule, args.k, args.min, args.max, args.fixed_cost)
            ratios = " | ".join("%.3f" % ((tokens - len(jobs)) / (s + x * d)) for x in costs)
            print("| %s | %d | %d | %d | %d | %d | %d | %s |" % (rule, len(jobs), tokens, v, d, a, s, ratios))


if __name__ == "__main__":
    main()
