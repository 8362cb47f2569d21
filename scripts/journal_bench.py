#!/usr/bin/env python3
"""What the job journal costs, and whether its file stays bounded. Prints tables, writes JSON.

  scripts/journal_bench.py cost --device null [--pairs 3]   # journal off vs on, alternating, one run
  scripts/journal_bench.py cost --device cpu  [--pairs 2]   # the same on SmolLM2 (the CPU executor)
  scripts/journal_bench.py disk --minutes 10 --retention 60 --rate 200

`cost` starts `conveyor serve` (--no-journal, then the journal in a fresh state dir; off and on
alternate `--pairs` times so drift on a shared machine hits both) and runs the same `conveyor
bench` load against each: the null executor at 256 concurrent streams (32 prompt tokens, 8192
output tokens each), or SmolLM2 with 32 jobs of 64 prompt and 64 output tokens at once.

`disk` runs the null executor with the journal at a steady request rate for --minutes and samples
the journal's size on disk (journal.db + its WAL) every --every seconds: with finished jobs
deleted after --retention, the size must level off at about rate x retention x (one job's rows).
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CONVEYOR_BIN", os.path.join(ROOT, "build", "conveyor"))

LOADS = {  # device -> (serve flags, bench flags)
    "null": (["--device", "null", "--num-kv-blocks", "140000"],
             ["--workload", "random", "--input-len", "32", "--output-len", "8192", "--num-prompts", "256"]),
    "cpu": (["--device", "cpu"],
            ["--workload", "random", "--input-len", "64", "--output-len", "64", "--num-prompts", "32"]),
}


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Server:
    def __init__(self, flags, work, tag):
        r, p, q = free_ports(3)
        self.router, self.pub = "tcp://127.0.0.1:%d" % r, "tcp://127.0.0.1:%d" % p
        self.log = os.path.join(work, "serve-%s.log" % tag)
        cmd = [BIN, "serve", "--router", self.router, "--pub", self.pub, "--pull", "tcp://127.0.0.1:%d" % q,
               "--drain-timeout", "0"] + flags
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def bench(server, flags, out_json, extra=()):
    cmd = [BIN, "bench", "--router", server.router, "--pub", server.pub, "--request-rate", "inf",
           "--connect-timeout", "120", "--no-progress", "--json", out_json] + flags + list(extra)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("journal_bench: bench failed (%d):\n%s\n%s\nserver log: %s" % (res.returncode, res.stdout, res.stderr, server.log))
    with open(out_json) as f:
        return json.load(f)


def cost(args):
    work = tempfile.mkdtemp(prefix="conveyor-journal-cost-")
    serve_flags, bench_flags = LOADS[args.device]
    rows = []
    for i in range(args.pairs):
        for mode in ("off", "on"):
            tag = "%s-%d" % (mode, i)
            state = os.path.join(work, "state-" + tag)
            flags = serve_flags + (["--no-journal"] if mode == "off" else ["--state-dir", state])
            srv = Server(flags, work, tag)
            try:
                r = bench(srv, bench_flags, os.path.join(work, tag + ".json"))
            finally:
                srv.stop()
            row = {"run": tag, "journal": mode, "output_tok_s": r["output_throughput"], "duration_s": r["duration"],
                   "mean_ttft_ms": r["mean_ttft_ms"], "mean_itl_ms": r["mean_itl_ms"], "p99_itl_ms": r.get("p99_itl_ms"),
                   "journal_bytes": sum(os.path.getsize(os.path.join(state, f)) for f in os.listdir(state)) if mode == "on" else 0}
            rows.append(row)
            print("%-6s %12.0f tok/s  %7.2f s  TTFT %8.1f ms  ITL %6.2f ms" %
                  (tag, row["output_tok_s"], row["duration_s"], row["mean_ttft_ms"], row["mean_itl_ms"]), file=sys.stderr)
    mean = {m: sum(r["output_tok_s"] for r in rows if r["journal"] == m) / args.pairs for m in ("off", "on")}
    print("| run | journal | output tokens/s | duration | mean TTFT | mean ITL | p99 ITL |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %s | %.2f s | %.1f ms | %.2f ms | %s |" % (
            r["run"], r["journal"], format(round(r["output_tok_s"]), ","), r["duration_s"], r["mean_ttft_ms"],
            r["mean_itl_ms"], "%.2f ms" % r["p99_itl_ms"] if r["p99_itl_ms"] is not None else ""))
    ratio = mean["on"] / mean["off"]
    print("\nmean output tokens/s: off %s, on %s: on/off = %.3f (%+.1f%%)" % (
        format(round(mean["off"]), ","), format(round(mean["on"]), ","), ratio, (ratio - 1) * 100))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "rows": rows, "mean": mean, "on_over_off": ratio}, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)


def disk(args):
    work = tempfile.mkdtemp(prefix="conveyor-journal-disk-")
    state = os.path.join(work, "state")
    srv = Server(["--device", "null", "--num-kv-blocks", "140000", "--state-dir", state, "--retention", str(args.retention)],
                 work, "disk")
    n = int(args.rate * args.minutes * 60)
    load = subprocess.Popen([BIN, "bench", "--router", srv.router, "--pub", srv.pub, "--workload", "random",
                             "--input-len", "32", "--output-len", str(args.output_len), "--num-prompts", str(n),
                             "--request-rate", str(args.rate), "--no-progress", "--connect-timeout", "60",
                             "--json", os.path.join(work, "load.json")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    samples, t0 = [], time.monotonic()
    try:
        while load.poll() is None:
            time.sleep(args.every)
            size = sum(os.path.getsize(os.path.join(state, f)) for f in os.listdir(state) if f.startswith("journal.db"))
            samples.append((round(time.monotonic() - t0), size))
            print("%5d s  %10.2f MB" % (samples[-1][0], size / 1e6), file=sys.stderr)
    finally:
        load.wait()
        srv.stop()
    with open(os.path.join(work, "load.json")) as f:
        r = json.load(f)
    print("| elapsed | journal on disk (db + WAL) |")
    print("|---|---|")
    step = max(1, len(samples) // 12)
    for t, size in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
        print("| %d s | %.2f MB |" % (t, size / 1e6))
    half = [s for _, s in samples[len(samples) // 2:]]
    print("\njobs %d at %.0f/s (%d output tokens each), retention %g s; second half: min %.2f MB, max %.2f MB" % (
        r["completed"], args.rate, args.output_len, args.retention, min(half) / 1e6, max(half) / 1e6))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rate": args.rate, "retention_s": args.retention, "completed": r["completed"], "samples": samples}, f)
    shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cost", help="journal off vs on under the same load")
    c.add_argument("--device", choices=sorted(LOADS), default="null")
    c.add_argument("--pairs", type=int, default=3)
    c.add_argument("--json")
    d = sub.add_parser("disk", help="the journal's size under a long steady load")
    d.add_argument("--minutes", type=float, default=10)
    d.add_argument("--retention", type=float, default=60)
    d.add_argument("--rate", type=float, default=200, help="jobs per second")
    d.add_argument("--output-len", type=int, default=64)
    d.add_argument("--every", type=float, default=10, help="seconds between size samples")
    d.add_argument("--json")
    args = ap.parse_args()
    if not os.access(BIN, os.X_OK):
        sys.exit("journal_bench: %s not found; run ./setup.sh (or set CONVEYOR_BIN)" % BIN)
    cost(args) if args.cmd == "cost" else disk(args)


if __name__ == "__main__":
    main()
