#!/usr/bin/env python3
"""Single-stream decode speed of `conveyor generate`, alone and with one busy process sharing the
cores (a sidecar's normal life), for each binary given (--bin, repeatable; runs interleaved so
both see the same machine), and with --llama-bench for llama.cpp's llama-bench (tg, the same
model and threads) in the same rounds. Prints one table (median decode tokens/s of --runs runs)
and writes --json.

  .venv/bin/python scripts/bench_shared_cores.py --bin build/conveyor --bin /tmp/old/conveyor --json shared.json
  .venv/bin/python scripts/bench_shared_cores.py --bin build/conveyor --threads 2 \
      --llama-bench "$(scripts/build_llama_cpp.sh)/llama-bench" --json shared.json
"""
import os
import argparse
import json
import re
import statistics
import subprocess
import sys

DECODE = re.compile(r"decode: (\d+) tokens in ([\d.]+) ms \(([\d.]+) tokens/s\)")


def decode_rate(binary, model, tokens, threads):
    cmd = [binary, "generate", "-p", "The history of the printing press begins", "-n", str(tokens), "--temperature", "0",
           "--ignore-eos"]
    if model:
        cmd += ["--model", model]
    if threads:
        cmd += ["--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    m = DECODE.search(out.stdout + out.stderr)
    if not m:
        sys.exit("no decode line from %s:\n%s" % (" ".join(cmd), out.stdout + out.stderr))
    return float(m.group(3))


def llama_rate(bench, model, tokens, threads):
    cmd = [bench, "-m", model, "-p", "0", "-n", str(tokens), "-t", str(threads or os.cpu_count()), "-r", "1", "-o", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    try:
        return float(json.loads(out.stdout)[0]["avg_ts"])
    except (ValueError, LookupError, TypeError):
        sys.exit("no result from %s:\n%s" % (" ".join(cmd), out.stdout + out.stderr))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", required=True)
    ap.add_argument("--model", default="")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="--threads for generate (0: its default)")
    ap.add_argument("--llama-bench", help="llama.cpp's llama-bench, run in the same rounds (label 'llama.cpp')")
    ap.add_argument("--json")
    a = ap.parse_args()
    model = a.model or os.path.expanduser("~/.cache/conveyor/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    runners = [(b, lambda b=b: decode_rate(b, a.model, a.tokens, a.threads)) for b in a.bin]
    if a.llama_bench:
        runners.append(("llama.cpp", lambda: llama_rate(a.llama_bench, model, a.tokens, a.threads)))
    a.bin = [name for name, _ in runners]
    rates = {(b, c): [] for b in a.bin for c in ("alone", "shared")}
    for case in ("alone", "shared"):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if case == "shared" else None
        try:
            for _ in range(a.runs):
                for b, rate in runners:
                    rates[(b, case)].append(rate())
        finally:
            if busy:
                busy.kill()
                busy.wait()
    print("%-36s %14s %14s %8s" % ("binary", "alone tok/s", "shared tok/s", "ratio"))
    rows = []
    for b in a.bin:
        alone, shared = statistics.median(rates[(b, "alone")]), statistics.median(rates[(b, "shared")])
        rows.append({"binary": b, "alone": rates[(b, "alone")], "shared": rates[(b, "shared")], "alone_median": alone,
                     "shared_median": shared})
        print("%-36s %14.1f %14.1f %8.2f" % (b[-36:], alone, shared, shared / alone))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tokens": a.tokens, "runs": a.runs, "threads": a.threads, "model": model, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
