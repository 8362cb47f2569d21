#!/usr/bin/env python3
"""What structured outputs cost end to end: N chat jobs over the structured-output test's 5 JSON
schemas, B at a time through the OpenAI-compatible HTTP API of one `conveyor serve` (CPU,
SmolLM2), then the same jobs without a schema, forced to the same output lengths (max_tokens =
the constrained job's length, ignore_eos), so both runs compute the same tokens. At temperature 0
and 1. Prints a table; --json FILE writes it.

    .venv/bin/python scripts/bench_structured.py [--jobs 64] [--concurrency 32] [--json out.json]

The grammar's per-step cost alone (masks, accepts, the masked draw) is build/grammar-bench.
"""
import argparse
import concurrent.futures
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "tests"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
os.environ.setdefault("CONVEYOR_BIN", os.path.join(ROOT, "build", "conveyor"))

from test_openai_http import HttpServer  # noqa: E402
from test_structured_outputs import PROMPTS, SCHEMAS  # noqa: E402


def run_jobs(server, jobs, concurrency):
    client = server.openai(timeout=1200)

    def one(job):
        r = client.chat.completions.create(model=server.model, **job)
        return r.usage.completion_tokens, r.choices[0].message.content

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        out = list(pool.map(one, jobs))
    return time.monotonic() - t0, out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    server = HttpServer("--no-journal", "--max-num-seqs", str(args.concurrency))
    rows = []
    try:
        for temperature in (0.0, 1.0):
            constrained = []
            for i in range(args.jobs):
                k = i % len(SCHEMAS)
                constrained.append({"messages": [{"role": "user", "content": PROMPTS[k]}], "temperature": temperature,
                                    "seed": i, "max_tokens": 160,
                                    "response_format": {"type": "json_schema",
                                                        "json_schema": {"name": "s%d" % k, "schema": SCHEMAS[k]}}})
            run_jobs(server, constrained[:4], 4)  # warm-up: compile the schemas, fill the caches
            wall_c, out_c = run_jobs(server, constrained, args.concurrency)
            free = []
            for job, (n, _) in zip(constrained, out_c):
                f = {k: v for k, v in job.items() if k != "response_format"}
                f.update(max_tokens=n, extra_body={"ignore_eos": True})
                free.append(f)
            wall_f, out_f = run_jobs(server, free, args.concurrency)
            tokens = sum(n for n, _ in out_c)
            assert tokens == sum(n for n, _ in out_f), "the free run did not compute the same tokens"
            rows.append({"temperature": temperature, "jobs": args.jobs, "concurrency": args.concurrency,
                         "output_tokens": tokens, "constrained_s": round(wall_c, 2), "free_s": round(wall_f, 2),
                         "constrained_tok_s": round(tokens / wall_c, 1), "free_tok_s": round(tokens / wall_f, 1),
                         "overhead_pct": round(100.0 * (wall_c / wall_f - 1.0), 1)})
    finally:
        server.stop(60)
        server.kill()
    print("%-11s %5s %6s %8s %13s %8s %12s %9s" % ("temperature", "jobs", "batch", "tokens", "constrained s",
                                                   "free s", "constr tok/s", "overhead"))
    for r in rows:
        print("%-11s %5d %6d %8d %13.2f %8.2f %12.1f %8.1f%%" % (r["temperature"], r["jobs"], r["concurrency"],
                                                                  r["output_tokens"], r["constrained_s"], r["free_s"],
                                                                  r["constrained_tok_s"], r["overhead_pct"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
