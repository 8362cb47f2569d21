#!/usr/bin/env python3
"""Resident memory of `conveyor serve` with its defaults (SmolLM2, CPU): idle after start-up, then
after --jobs concurrent jobs of --prompt-len prompt tokens and --max-tokens output tokens, then
idle again. For each binary given (--bin, repeatable: two builds side by side in one run).
Prints one table and writes --json.

  .venv/bin/python scripts/bench_rss.py --bin build/conveyor --bin /tmp/old/conveyor --json rss.json
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from conveyor_client import Client  # noqa: E402

KV_LINE = re.compile(r"KV cache (.*)")


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def measure(binary, jobs, prompt_len, max_tokens):
    d = tempfile.mkdtemp(prefix="conveyor-rss-")
    eps = {k: "ipc://%s/%s" % (d, k) for k in ("router", "pub", "pull")}
    log = open(os.path.join(d, "log"), "w+")
    p = subprocess.Popen([binary, "serve", "--no-journal", "--router", eps["router"], "--pub", eps["pub"], "--pull", eps["pull"]],
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        with Client(router=eps["router"], pub=eps["pub"]) as c:
            deadline = time.monotonic() + 120
            while True:
                try:
                    c.health()
                    break
                except Exception:
                    if time.monotonic() > deadline or p.poll() is not None:
                        raise RuntimeError("server did not come up:\n" + open(log.name).read())
                    time.sleep(0.2)
            time.sleep(1.0)
            idle = rss_mb(p.pid)
            prompt = [100 + (i * 7919) % 30000 for i in range(prompt_len)]
            ids = [c.submit(prompt_tokens=[t + j for t in prompt], max_tokens=max_tokens, temperature=0, ignore_eos=True,
                            stream=False) for j in range(jobs)]
            peak = idle
            for i in ids:
                c.wait(i, timeout=1800)
                peak = max(peak, rss_mb(p.pid))
            time.sleep(1.0)
            after = rss_mb(p.pid)
        kv = next((m.group(1) for m in map(KV_LINE.search, open(log.name).read().splitlines()) if m), "")
        return {"binary": binary, "idle_mb": idle, "peak_mb": peak, "after_mb": after, "kv": kv}
    finally:
        p.terminate()
        p.wait(60)
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", required=True)
    ap.add_argument("--jobs", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = [measure(b, a.jobs, a.prompt_len, a.max_tokens) for b in a.bin]
    print("%-40s %10s %14s %12s" % ("binary", "idle MB", "peak MB (%d)" % a.jobs, "after MB"))
    for r in rows:
        print("%-40s %10.0f %14.0f %12.0f" % (r["binary"][-40:], r["idle_mb"], r["peak_mb"], r["after_mb"]))
    for r in rows:
        print("  %s: KV cache %s" % (r["binary"], r["kv"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"jobs": a.jobs, "prompt_len": a.prompt_len, "max_tokens": a.max_tokens, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
