#!/usr/bin/env python3
"""Resident memory of `conveyor serve` with its defaults (SmolLM2, CPU): idle after start-up, then
after --jobs concurrent jobs of --prompt-len prompt tokens and --max-tokens output tokens, then
idle again. For each binary given (--bin, repeatable: two builds side by side in one run), and
with --llama-server for llama.cpp's llama-server given the same KV size (-c: conveyor's pool in
tokens, one slot per job, f16 cache), driven with the same prompts as token ids.
Prints one table and writes --json.

  .venv/bin/python scripts/bench_rss.py --bin build/conveyor --bin /tmp/old/conveyor --json rss.json
  .venv/bin/python scripts/bench_rss.py --bin build/conveyor \
      --llama-server "$(scripts/build_llama_cpp.sh)/llama-server" --json rss.json
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
import bench_cpu_vs_llamacpp_util as llama  # noqa: E402  (scripts/: llama-server start, health, requests)

KV_LINE = re.compile(r"KV cache (.*)")
KV_TOKENS = re.compile(r"= (\d+) tokens")


def rss_mb(pid):
    return llama.proc_status(pid)["VmRSS"]


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
            ids = [c.submit(prompt_tokens=pr, max_tokens=max_tokens, temperature=0, ignore_eos=True, stream=False)
                   for pr in prompts(jobs, prompt_len)]
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


def prompts(jobs, prompt_len):
    base = [100 + (i * 7919) % 30000 for i in range(prompt_len)]
    return [[t + j for t in base] for j in range(jobs)]


def measure_llama(server, model, kv_tokens, jobs, prompt_len, max_tokens, threads):
    port = llama.free_port()
    p = llama.start_server([server, "-m", model, "-c", str(kv_tokens), "-np", str(jobs), "-t", str(threads),
                            "--port", str(port), "--host", "127.0.0.1", "--no-webui"], "llama-server-rss")
    try:
        llama.wait_health(p, port)
        time.sleep(1.0)
        idle = rss_mb(p.pid)
        peak = [idle]
        done = []

        def sample():
            while not done:
                peak[0] = max(peak[0], rss_mb(p.pid))
                time.sleep(0.05)
        import threading
        t = threading.Thread(target=sample)
        t.start()
        try:
            llama.drive_llama(port, prompts(jobs, prompt_len), jobs, max_tokens)
        finally:
            done.append(1)
            t.join()
        time.sleep(1.0)
        return {"binary": "llama-server", "idle_mb": idle, "peak_mb": peak[0], "after_mb": rss_mb(p.pid),
                "kv": "-c %d -np %d (f16)" % (kv_tokens, jobs)}
    finally:
        llama.stop_server(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", required=True)
    ap.add_argument("--jobs", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--llama-server", help="llama.cpp's llama-server, given the first --bin's KV size")
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/conveyor/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
                    help="the GGUF llama-server loads (conveyor serve's default model)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = [measure(b, a.jobs, a.prompt_len, a.max_tokens) for b in a.bin]
    if a.llama_server:
        m = KV_TOKENS.search(rows[0]["kv"])
        if not m:
            sys.exit("cannot read the KV size from conveyor's start-up line: " + rows[0]["kv"])
        try:
            rows.append(measure_llama(a.llama_server, a.model, int(m.group(1)), a.jobs, a.prompt_len, a.max_tokens, a.threads))
        finally:
            llama.stop_all()
    print("%-40s %10s %14s %12s" % ("binary", "idle MB", "peak MB (%d)" % a.jobs, "after MB"))
    for r in rows:
        print("%-40s %10.0f %14.0f %12.0f" % (r["binary"][-40:], r["idle_mb"], r["peak_mb"], r["after_mb"]))
    for r in rows:
        print("  %s: KV cache %s" % (r["binary"], r["kv"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"jobs": a.jobs, "prompt_len": a.prompt_len, "max_tokens": a.max_tokens, "rows": rows}, f, indent=1)
    if a.llama_server and len(rows) >= 2:
        print("peak ratio conveyor / llama-server: %.2f" % (rows[0]["peak_mb"] / rows[-1]["peak_mb"]))


if __name__ == "__main__":
    main()
