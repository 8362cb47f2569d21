#!/usr/bin/env python3
"""Speculative decoding (n-gram prompt lookup) on and off, side by side in one run (issue 30).

conveyor: two `conveyor serve` processes (--threads, --cpu-math fast), one with
--speculative-config '{"method":"none"}' and one with --spec (vLLM's shape), both up for the
whole run (an idle server costs nothing), prefix caching off in both (--prefix-caching keeps
it: every round and cell sends the same prompts again, which a cache serves from the second
time on, where a pipeline's grounded jobs carry new documents), measured cell by cell, each
cell off and on back to back with the order alternating, by `conveyor bench` with all jobs
sent at once and at most C in flight (--max-concurrency C), greedy:
  grounded  tools/bench/data/grounded.jsonl (scripts/make_grounded_workload.py): answers that copy
            their prompt; targets: 1 job at a time >= 2.0x the output tok/s of speculation off,
            4 at once >= 1.5x, 32 at once >= 1.1x
  chat      `conveyor bench --workload chat` (the existing non-grounded workload: a system turn,
            earlier exchanges and a question of random English words); 1 and 32 at once >= 0.97x
Output check: every grounded job and the open-ended questions of tools/bench/data/open.jsonl are
answered by both servers over HTTP (greedy, --verify-concurrency at once): speculation must
change no answer; each difference is listed. llama.cpp (scripts/build_llama_cpp.sh): the
grounded jobs one at a time, as the same prompt token ids (conveyor's /tokenize of the chat
messages) on `llama-server` without and with each --llama-configs speculative mode, and
`llama-lookup` (its own timers; model loading excluded); the best llama.cpp lookup is the one
conveyor's speculation must beat. Table on stdout, progress on stderr, every server stopped on
exit, error or Ctrl-C.

    python3 scripts/bench_spec.py [--json out.json] [--spec JSON] [--only conveyor,llama]
    python3 scripts/bench_spec.py --limit 8 --concurrency 1,4    # a quick look
    python3 scripts/bench_spec.py --rounds 3    # each cell as 3 (off, on) pairs, pooled: a drifting host
"""
import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cpu_vs_llamacpp_util import (  # noqa: E402
    check, free_port, keep_tmp, log, run, server_log, start_server, stop_all, stop_server, tmp_root, wait_health)
import bench_spec_util as u  # noqa: E402

ROOT = u.ROOT
CACHE = os.environ.get("CONVEYOR_CACHE") or os.path.expanduser("~/.cache/conveyor")
DATA = os.path.join(ROOT, "tools", "bench", "data")
# The 'on' server's --speculative-config unless --spec says otherwise: `conveyor serve`'s own default.
SPEC_ON = '{"method":"ngram","num_speculative_tokens":8,"prompt_lookup_min":1,"prompt_lookup_max":5}'
SPEC_OFF = '{"method":"none"}'
TARGETS = {("grounded", 1): 2.0, ("grounded", 4): 1.5, ("grounded", 32): 1.1, ("chat", 1): 0.97, ("chat", 32): 0.97}
# llama-server speculative modes without a draft model (llama.cpp 0.3.36's --spec-type list).
LLAMA_CONFIGS = {
    "plain": [],
    "ngram-cache": ["--spec-type", "ngram-cache"],  # llama-lookup's n-gram cache: 1..4-grams, up to 8 drafted
    "ngram-simple": ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "8"],
    "ngram-map-k": ["--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", "3", "--spec-ngram-map-k-size-m", "8"],
    "ngram-mod": ["--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "4", "--spec-ngram-mod-n-min", "1",
                  "--spec-ngram-mod-n-max", "8"],
}
LOOKUP_CLI = "llama-lookup"  # a --llama-configs name: the example program, --spec-draft-n-max --lookup-draft


class Bench:
    def __init__(self, a):
        self.a = a
        self.rows, self.llama_rows, self.raw, self.notes, self.commands = [], [], {}, [], []
        self.grounded = u.read_jobs(a.grounded)[: a.limit or None]
        self.open = u.read_jobs(a.open)[: a.limit or None]

    # -- conveyor --
    def start_conveyor(self, label, spec):
        ports = {k: free_port() for k in ("router", "pub", "pull", "http")}
        state = tempfile.mkdtemp(dir=tmp_root, prefix=f"state-{label}.")
        cmd = [self.a.conveyor, "serve", "--model", self.a.model, "--threads", str(self.a.threads), "--cpu-math", "fast",
               "--router", f"tcp://127.0.0.1:{ports['router']}", "--pub", f"tcp://127.0.0.1:{ports['pub']}",
               "--pull", f"tcp://127.0.0.1:{ports['pull']}", "--http-port", str(ports["http"]), "--state-dir", state,
               "--max-num-seqs", str(max(32, max(self.a.concurrency))),
               "--enable-prefix-caching", "1" if self.a.prefix_caching else "0"]
        if spec is not None:
            cmd += ["--speculative-config", spec]
        srv = start_server(cmd + shlex.split(self.a.serve_args), "conveyor-" + label)
        srv.ports, srv.label, srv.cmd = ports, label, cmd
        return srv

    def bench_cell(self, srv, workload, jobs):
        out = os.path.join(tmp_root, f"bench-{srv.label}-{workload}-{jobs}.json")
        cmd = [self.a.conveyor, "bench", "--router", f"tcp://127.0.0.1:{srv.ports['router']}",
               "--pub", f"tcp://127.0.0.1:{srv.ports['pub']}", "--max-concurrency", str(jobs), "--temperature", "0",
               "--connect-timeout", "120", "--no-progress", "--json", out]
        if workload == "grounded":
            cmd += ["--workload", "file", "--dataset", self.a.grounded, "--num-prompts", str(len(self.grounded))]
        else:
            cmd += ["--workload", "chat"] + shlex.split(self.a.chat_args)
        if self.a.ignore_eos:
            cmd.append("--ignore-eos")
        rc, o, e, _, secs = run(cmd)
        if srv.poll() is not None:
            raise RuntimeError(f"conveyor serve ({srv.label}) exited:\n" + server_log(srv))
        check(rc, o, e, "conveyor bench")
        with open(out) as f:
            res = json.load(f)
        if res.get("failed") or res.get("unfinished") or res.get("rejected"):
            raise RuntimeError(f"conveyor bench ({srv.label}, {workload}, {jobs}): failed {res.get('failed')}, "
                               f"unfinished {res.get('unfinished')}, rejected {res.get('rejected')}")
        log(f"  {srv.label}: {res['output_throughput']:.1f} output tok/s ({res['total_output_tokens']} tokens, "
            f"{res['duration']:.1f} s)")
        keep = ("output_throughput", "total_output_tokens", "total_input_tokens", "duration", "completed",
                "median_ttft_ms", "median_tpot_ms", "finish_reasons", "spec_decode_num_drafts",
                "spec_decode_num_draft_tokens", "spec_decode_num_accepted_tokens", "spec_decode_acceptance_rate",
                "spec_decode_mean_accepted_length")
        return {k: res.get(k) for k in keep}, cmd

    def conveyor(self):
        """The conveyor cells and the output check; first the grounded prompts' token ids (also
        what llama.cpp gets). With --only llama, one server without the flag only renders them."""
        measure = "conveyor" in self.a.only
        flag = measure and not self.a.no_spec_flag
        off = self.start_conveyor("off", SPEC_OFF if flag else None)
        on = self.start_conveyor("on", self.a.spec if flag else None) if measure else off
        try:
            for srv in {off, on}:
                wait_health(srv, srv.ports["http"])
                u.conveyor_answer(srv.ports["http"], {"id": "warm", "messages": [{"role": "user", "content": "Hi"}],
                                                      "max_tokens": 8})
            if measure:
                self.commands += [shlex.join(off.cmd), shlex.join(on.cmd)]
            self.prompt_ids = [u.conveyor_tokenize(off.ports["http"], j["messages"]) for j in self.grounded]
            self.rendered = [u.conveyor_detokenize(off.ports["http"], ids) for ids in self.prompt_ids]
            lens = [len(ids) for ids in self.prompt_ids]
            self.raw["grounded_prompt_tokens"] = {"min": min(lens), "max": max(lens), "mean": sum(lens) / len(lens)}
            if not measure:
                return
            cell = 0
            for workload in self.a.workloads:
                for jobs in self.a.concurrency:
                    def measure_cell():
                        # --rounds R: R (off, on) pairs, the order alternating, pooled: each pair
                        # sees the host as it is for those seconds (its speed drifts over minutes).
                        runs, other = {"off": [], "on": []}, u.OtherLoad([off.pid, on.pid])
                        for r in range(self.a.rounds):
                            for srv in ((off, on) if (cell + r) % 2 == 0 else (on, off)):
                                res, cmd = self.bench_cell(srv, workload, jobs)
                                runs[srv.label].append(res)
                        return ({k: pool_runs(v) for k, v in runs.items()}, cmd), other.share()
                    (got, cmd), other = self.quietly(f"{workload}, {jobs} at once", measure_cell)
                    cell += 1
                    self.row(workload, jobs, got["off"], got["on"], other)
                    if cell == 1:
                        self.commands.append(shlex.join(cmd))
            self.verify(off, on)
            self.raw["conveyor_spec_metrics"] = u.conveyor_metrics(on.ports["http"])
        finally:
            for srv in {off, on}:
                stop_server(srv)

    def quietly(self, what, measure):
        """measure() -> (result, others' CPU share); measured again (--retries) while other
        processes took 10% of the CPU or more, after waiting for quiet (--wait-quiet)."""
        for attempt in range(self.a.retries + 1):
            busy = u.wait_quiet(self.a.wait_quiet, log) if self.a.wait_quiet else 0.0
            log(f"{what} (CPU {busy:.0%} busy before)")
            res, other = measure()
            if other < 0.10:
                break
            log(f"  other processes took {other:.0%} of the CPU during it" +
                ("; measuring again" if attempt < self.a.retries else ""))
        return res, other

    def row(self, workload, jobs, off, on, other):
        ratio = on["output_throughput"] / off["output_throughput"] if off["output_throughput"] else None
        target = TARGETS.get((workload, jobs))
        met = None if target is None or ratio is None else ratio >= target
        self.rows.append({"workload": workload, "jobs": jobs, "off_tok_s": off["output_throughput"],
                          "on_tok_s": on["output_throughput"], "ratio": ratio, "target": target, "met": met,
                          "other_cpu_share": round(other, 3), "off": off, "on": on})
        if other >= 0.05:
            self.notes.append(f"{workload} x{jobs}: other processes took {other:.0%} of the CPU during it: noisy")
        if workload == "grounded" and not self.a.no_spec_flag and off["total_output_tokens"] != on["total_output_tokens"]:
            self.notes.append(f"grounded x{jobs}: {off['total_output_tokens']} output tokens with speculation off, "
                              f"{on['total_output_tokens']} on: the answers differ")

    def verify(self, off, on):
        if self.a.verify_concurrency <= 0:
            return
        jobs = self.grounded + self.open
        log(f"output check: {len(jobs)} jobs on both servers, {self.a.verify_concurrency} at once")
        answers = {srv.label: u.parallel(lambda j, p=srv.ports["http"]: u.conveyor_answer(p, j, self.a.ignore_eos),
                                         jobs, self.a.verify_concurrency) for srv in (off, on)}
        diffs = u.compare_answers(answers["off"], answers["on"])
        self.raw["output_check"] = {"jobs": len(jobs), "differences": diffs,
                                    "output_tokens": sum(a["tokens"] or 0 for a in answers["off"])}
        self.conveyor_answers = answers["off"]
        for d in diffs[:5]:
            self.notes.append(f"output differs, job {d['id']} at character {d['at']}: off {d['off']!r} / on {d['on']!r}")

    # -- llama.cpp --
    def llama(self):
        prompts = [(ids, j["max_tokens"]) for ids, j in zip(self.prompt_ids, self.grounded)]
        ctx = max(len(ids) for ids in self.prompt_ids) + max(j["max_tokens"] for j in self.grounded) + 64
        for name in self.a.llama_configs:
            if name == LOOKUP_CLI:
                self.quietly("llama-lookup", lambda: (None, self.llama_lookup_cli(ctx)))
                continue
            port = free_port()
            cmd = [os.path.join(self.a.llama_dir, "llama-server"), "-m", self.a.model, "-np", "1", "-c", str(ctx),
                   "-t", str(self.a.threads), "--host", "127.0.0.1", "--port", str(port)] + LLAMA_CONFIGS[name]
            srv = start_server(cmd, "llama-" + name)
            try:
                wait_health(srv, port)
                u.llama_completion(port, prompts[0][0][:16], 8)  # warm-up

                def measure():
                    other = u.OtherLoad([srv.pid])
                    return u.drive_llama_ids(port, prompts, 1, self.a.ignore_eos), other.share()
                res, busy = self.quietly(f"llama.cpp {name}", measure)
            finally:
                stop_server(srv)
            log(f"  llama.cpp {name}: {res['output_tok_s']:.1f} output tok/s, drafted {res['draft_n']}, "
                f"accepted {res['draft_accepted']}")
            self.llama_rows.append({"system": f"llama-server {name}", "config": name, "tok_s": res["output_tok_s"],
                                    "output_tokens": res["output_tokens"], "draft_n": res["draft_n"],
                                    "draft_accepted": res["draft_accepted"], "other_cpu_share": round(busy, 3),
                                    "command": shlex.join(cmd)})
            self.raw.setdefault("llama_texts", {})[name] = res["texts"]
        plain = self.raw.get("llama_texts", {}).get("plain")
        for r in self.llama_rows:
            texts = self.raw.get("llama_texts", {}).get(r["config"])
            if plain and texts and r["config"] != "plain":
                r["answers_unlike_plain"] = sum(x != y for x, y in zip(plain, texts))
                if r["answers_unlike_plain"]:
                    self.notes.append(f"llama.cpp {r['config']}: {r['answers_unlike_plain']} of {len(texts)} answers differ "
                                      "from llama.cpp's without speculation")

    def llama_lookup_cli(self, ctx):
        binary = os.path.join(self.a.llama_dir, "llama-lookup")
        runs, other = [], u.OtherLoad([])
        for text, ids, job in zip(self.rendered, self.prompt_ids, self.grounded):
            r = u.llama_lookup_once(binary, self.a.model, text, job["max_tokens"], self.a.threads, self.a.lookup_draft, ctx)
            if r["prompt_tokens"] != len(ids):
                self.notes.append(f"llama-lookup read job {job['id']} as {r['prompt_tokens']} tokens, conveyor {len(ids)}")
            runs.append(r)
        tokens, secs = sum(r["tokens"] for r in runs), sum(r["seconds"] for r in runs)
        busy = other.share()
        log(f"  llama-lookup: {tokens / secs:.1f} output tok/s (its timers)")
        self.llama_rows = [r for r in self.llama_rows if r["config"] != LOOKUP_CLI]  # an earlier, noisy try
        cmd = shlex.join(runs[0]["cmd"][:4] + ["PROMPT"] + runs[0]["cmd"][5:])
        self.llama_rows.append({"system": f"llama-lookup (--spec-draft-n-max {self.a.lookup_draft})", "config": LOOKUP_CLI,
                                "tok_s": tokens / secs, "output_tokens": tokens, "draft_n": sum(r["draft_n"] for r in runs),
                                "draft_accepted": sum(r["draft_accepted"] for r in runs), "other_cpu_share": round(busy, 3),
                                "command": cmd + "  (one process per job; prompt pass + decoding, model loading excluded)"})
        return busy


def pool_runs(runs):
    """One cell's `conveyor bench` results over --rounds runs: output tok/s of all of them
    (tokens over seconds), the counters summed, the rest of the first run, and every run's
    throughput (`round_tok_s`)."""
    if len(runs) == 1:
        return dict(runs[0], round_tok_s=[runs[0]["output_throughput"]])
    out = dict(runs[0])
    for k in ("total_output_tokens", "total_input_tokens", "duration", "completed", "spec_decode_num_drafts",
              "spec_decode_num_draft_tokens", "spec_decode_num_accepted_tokens"):
        if all(isinstance(r.get(k), (int, float)) for r in runs):
            out[k] = sum(r[k] for r in runs)
    out["output_throughput"] = out["total_output_tokens"] / out["duration"] if out["duration"] else 0.0
    v, d, acc = (out.get(k) for k in ("spec_decode_num_drafts", "spec_decode_num_draft_tokens",
                                      "spec_decode_num_accepted_tokens"))
    if v and d and acc is not None:
        out["spec_decode_acceptance_rate"] = acc / d
        out["spec_decode_mean_accepted_length"] = (v + acc) / v
    out["round_tok_s"] = [r["output_throughput"] for r in runs]
    return out


def fmt(v, spec=".1f"):
    return "—" if v is None else format(v, spec)


def report(b, info):
    a = b.a
    lines = [f"machine: {info['cpu']}, {info['cores']} cores, ISA {' '.join(info['isa'])}; load average "
             f"{' '.join('%.2f' % x for x in info['load_avg'])}", f"conveyor {info['commit']}; model {a.model}; "
             f"threads {a.threads}; greedy; speculation on: {'(no flag: --no-spec-flag)' if a.no_spec_flag else a.spec}", ""]
    if b.rows:
        lines += ["| workload | jobs at once | off tok/s | on tok/s | ratio | target | met | accepted | mean length |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in b.rows:
            met = "—" if r["met"] is None else "yes" if r["met"] else "NO"
            rate, mean = r["on"].get("spec_decode_acceptance_rate"), r["on"].get("spec_decode_mean_accepted_length")
            lines.append(f"| {r['workload']} | {r['jobs']} | {fmt(r['off_tok_s'])} | {fmt(r['on_tok_s'])} | "
                         f"{fmt(r['ratio'], '.2f')}× | {'—' if r['target'] is None else '≥ %.2f×' % r['target']} | {met} | "
                         f"{'—' if rate is None else '%.0f%%' % (100 * rate)} | {fmt(mean, '.2f')} |")
        lines += ["", "accepted: drafted tokens accepted; mean length: tokens a verification step yields (1 + accepted "
                  "drafts), from `conveyor bench`"]
        if a.rounds > 1:
            lines += [f"{a.rounds} rounds per cell (off and on in turn, pooled); each round's on/off: "] + [
                f"- {r['workload']} x{r['jobs']}: " + ", ".join(
                    "%.2f" % (n / f) for f, n in zip(r["off"]["round_tok_s"], r["on"]["round_tok_s"]) if f) for r in b.rows]
        lines.append("")
    chk = b.raw.get("output_check")
    if chk:
        lines += [f"output check: {chk['jobs']} jobs, {len(chk['differences'])} answers differ between speculation off "
                  f"and on" + ("" if chk["differences"] else " (none)"), ""]
    if b.llama_rows:
        conv = {r["workload"] + str(r["jobs"]): r for r in b.rows}.get("grounded1")
        lines += ["grounded jobs one at a time, the same prompt token ids:",
                  "| system | output tok/s | drafted | accepted | others' CPU share |", "|---|---|---|---|---|"]
        for r in b.llama_rows:
            lines.append(f"| llama.cpp {r['system']} | {fmt(r['tok_s'])} | {r['draft_n']} | {r['draft_accepted']} | "
                         f"{r['other_cpu_share']:.0%} |")
        if conv:
            on = conv["on"]
            lines += [f"| conveyor, speculation off | {fmt(conv['off_tok_s'])} | | | {conv['other_cpu_share']:.0%} |",
                      f"| conveyor, speculation on | {fmt(conv['on_tok_s'])} | {on.get('spec_decode_num_draft_tokens', '—')} | "
                      f"{on.get('spec_decode_num_accepted_tokens', '—')} | |"]
            spec_rows = [r for r in b.llama_rows if r["config"] != "plain"]
            if spec_rows:
                best = max(spec_rows, key=lambda r: r["tok_s"])
                ratio = conv["on_tok_s"] / best["tok_s"]
                lines.append(f"\nconveyor on / best llama.cpp lookup ({best['system']}): {ratio:.2f}× "
                             f"(target > 1.00×: {'yes' if ratio > 1 else 'NO'})")
        lines.append("")
    lines += [f"note: {n}" for n in b.notes]
    lines += ["", "commands:"] + [f"- `{c}`" for c in b.commands] + [f"- `{r['command']}`" for r in b.llama_rows]
    return "\n".join(lines)


def preflight(a, ap):
    for path, what in ((a.conveyor, "--conveyor"), (a.model, "--model"), (a.grounded, "--grounded"), (a.open, "--open")):
        if not os.path.exists(path):
            ap.error(f"{what} {path} does not exist" + (". HINT: python3 scripts/fetch_model.py" if what == "--model" else ""))
    helps = subprocess.run([a.conveyor, "serve", "--help"], capture_output=True, text=True).stdout
    if "--speculative-config" not in helps and not a.no_spec_flag and "conveyor" in a.only:
        sys.exit(f"{a.conveyor} serve has no --speculative-config. HINT: build the tree with speculative decoding, "
                 "or pass --no-spec-flag to try the harness (both servers then run without speculation)")
    if "llama" in a.only:
        unknown = set(a.llama_configs) - set(LLAMA_CONFIGS) - {LOOKUP_CLI}
        if unknown:
            ap.error(f"unknown --llama-configs {sorted(unknown)}; pick from {sorted(LLAMA_CONFIGS) + [LOOKUP_CLI]}")
        need = ["llama-server"] + (["llama-lookup"] if LOOKUP_CLI in a.llama_configs else [])
        if not all(os.path.exists(os.path.join(a.llama_dir, t)) for t in need):
            if a.no_build:
                sys.exit(f"{need} missing in {a.llama_dir}. HINT: scripts/build_llama_cpp.sh")
            log("llama.cpp not built yet; running scripts/build_llama_cpp.sh (tens of minutes on 2 cores)")
            subprocess.check_call([os.path.join(ROOT, "scripts", "build_llama_cpp.sh")], stdout=sys.stderr)
    try:
        json.loads(a.spec)
    except ValueError as e:
        ap.error(f"--spec is not JSON ({e}): {a.spec}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--model", default=os.path.join(CACHE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=2, help="conveyor serve --threads and llama.cpp -t")
    ap.add_argument("--spec", default=SPEC_ON, help="--speculative-config of the 'on' server (default %(default)s)")
    ap.add_argument("--no-spec-flag", action="store_true", help="debug: pass no --speculative-config at all")
    ap.add_argument("--only", default="conveyor,llama", help="conveyor and/or llama")
    ap.add_argument("--workloads", default="grounded,chat", help="grounded and/or chat")
    ap.add_argument("--concurrency", default="1,4,32", help="jobs in flight, comma list")
    ap.add_argument("--grounded", default=os.path.join(DATA, "grounded.jsonl"))
    ap.add_argument("--open", default=os.path.join(DATA, "open.jsonl"), help="non-grounded jobs for the output check")
    ap.add_argument("--chat-args", default="--num-prompts 64 --input-len 256 --output-len 128 --cap 256 --seed 0",
                    help="conveyor bench flags of the chat workload")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N jobs of each file (a quick look)")
    ap.add_argument("--ignore-eos", action="store_true", help="force every answer to max_tokens")
    ap.add_argument("--verify-concurrency", type=int, default=32, help="output check jobs at once (0: no check)")
    ap.add_argument("--llama-configs", default="plain,ngram-cache,ngram-simple,llama-lookup",
                    help=f"comma list of {','.join(list(LLAMA_CONFIGS) + [LOOKUP_CLI])}")
    ap.add_argument("--lookup-draft", type=int, default=8, help="llama-lookup --spec-draft-n-max")
    ap.add_argument("--serve-args", default="", help="extra `conveyor serve` flags for both servers")
    ap.add_argument("--prefix-caching", action="store_true",
                    help="keep the servers' prefix caches on (rounds and cells then reuse the prompts' KV)")
    ap.add_argument("--conveyor", default=os.path.join(ROOT, "build", "conveyor"))
    ap.add_argument("--llama-dir", default=os.path.join(CACHE, "llama.cpp-0.3.36", "bin"))
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                    help="before each cell wait up to S s for other processes to leave the CPU < 10%% busy for 10 s")
    ap.add_argument("--retries", type=int, default=2, help="measure a cell again while others took >= 10%% of the CPU")
    ap.add_argument("--rounds", type=int, default=1,
                    help="(off, on) pairs per cell, the order alternating, pooled (a host whose speed drifts)")
    ap.add_argument("--no-build", action="store_true", help="fail instead of building llama.cpp when it is missing")
    ap.add_argument("--json", help="write rows, raw results, machine and commands here")
    a = ap.parse_args()
    a.only = [x for x in a.only.split(",") if x]
    a.workloads = [x for x in a.workloads.split(",") if x]
    a.concurrency = [int(x) for x in a.concurrency.split(",") if x]
    a.llama_configs = [x for x in a.llama_configs.split(",") if x]
    if set(a.only) - {"conveyor", "llama"} or set(a.workloads) - {"grounded", "chat"}:
        ap.error("--only takes conveyor,llama; --workloads grounded,chat")
    preflight(a, ap)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    info = {**u.machine(), "commit": u.commit(), "command": shlex.join(sys.argv)}
    b = Bench(a)
    ok = False
    try:
        b.conveyor()  # also renders the prompts for llama.cpp
        if "llama" in a.only:
            b.llama()
        ok = True
    finally:
        stop_all()
        if not ok:
            keep_tmp.append(True)
            log(f"server logs and results kept in {tmp_root}")
    info["load_avg_after"] = list(os.getloadavg())
    print(report(b, info))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": info, "rows": b.rows, "llama_cpp": b.llama_rows, "raw": b.raw, "notes": b.notes,
                       "commands": b.commands, "spec": a.spec, "threads": a.threads, "model": a.model}, f, indent=1)
    met = [r["met"] for r in b.rows if r["met"] is not None]
    return 0 if all(met) and not b.raw.get("output_check", {}).get("differences") else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        stop_all()
        sys.exit(130)
