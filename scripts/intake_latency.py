#!/usr/bin/env python3
"""Intake latency under a burst: how long a `status` request waits while 1,000 submits arrive at once.

For each conveyor binary given (--bin, repeatable: compare two builds in one run), starts
`conveyor serve --device null` on ipc:// endpoints in a temporary directory, waits for `health`,
then from one DEALER sends --submits submit requests back to back (prompts of --prompt-chars
characters, so tokenization costs something) while a second DEALER sends `status` requests one
after another until every submit is answered. Prints one table (status p50/p99/max, submit reply
p50/p99, burst time) and writes --json. Idle `status` latency is measured first, for reference.

  .venv/bin/python scripts/intake_latency.py --bin build/conveyor --bin /tmp/old/build/conveyor --json out.json
"""
import argparse
import json
import os
import random
import string
import subprocess
import sys
import tempfile
import time

import msgpack
import zmq


def pct(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def dealer(ctx, endpoint):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    return s


def ask(sock, msg, timeout_ms=30000):
    sock.send(msgpack.packb(msg))
    if not sock.poll(timeout_ms):
        raise RuntimeError("no reply within %d ms to %r" % (timeout_ms, msg.get("op")))
    return msgpack.unpackb(sock.recv(), raw=False)


def measure(binary, args):
    work = tempfile.mkdtemp(prefix="conveyor-intake-")
    eps = {k: "ipc://%s/%s" % (work, k) for k in ("router", "pub", "pull")}
    log = open(os.path.join(work, "serve.log"), "w")
    cmd = [binary, "serve", "--device", "null", "--router", eps["router"], "--pub", eps["pub"], "--pull", eps["pull"],
           "--num-kv-blocks", "20000", "--drain-timeout", "0", "--state-dir", os.path.join(work, "state")] + args.serve_args.split()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    ctx = zmq.Context()
    try:
        probe = dealer(ctx, eps["router"])
        for _ in range(300):
            if proc.poll() is not None:
                raise RuntimeError("%s exited with %d; see %s/serve.log" % (binary, proc.returncode, work))
            probe.send(msgpack.packb({"op": "health"}))
            if probe.poll(100):
                probe.recv()
                break
        else:
            raise RuntimeError("%s did not answer health within 30 s" % binary)
        idle = []
        for _ in range(200):
            t = time.perf_counter()
            ask(probe, {"op": "status", "id": "nobody"})
            idle.append((time.perf_counter() - t) * 1e3)

        rng = random.Random(7)
        words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9))) for _ in range(500)]
        burst = dealer(ctx, eps["router"])
        frames = []  # built first, so the burst leaves as fast as ZeroMQ takes it
        for i in range(args.submits):
            text = " ".join(rng.choice(words) for _ in range(args.prompt_chars // 6))[: args.prompt_chars]
            jid = "burst-%d-%d" % (os.getpid(), i)
            frames.append((jid, msgpack.packb({"op": "submit", "id": jid, "prompt": text, "max_tokens": args.max_tokens,
                                               "ignore_eos": True, "stream": False})))
        sent_at = {}
        t0 = time.perf_counter()
        for jid, frame in frames:
            sent_at[jid] = time.perf_counter()
            burst.send(frame)
        status_ms, submit_ms = [], []
        answered, accepted = 0, 0
        poller = zmq.Poller()
        poller.register(burst, zmq.POLLIN)
        poller.register(probe, zmq.POLLIN)
        probe_t = time.perf_counter()
        probe.send(msgpack.packb({"op": "status", "id": "nobody"}))
        deadline = time.time() + args.timeout_s
        while answered < args.submits:
            if time.time() > deadline:
                raise RuntimeError("only %d of %d submits answered within %d s" % (answered, args.submits, args.timeout_s))
            ready = dict(poller.poll(1000))
            if burst in ready:
                while True:
                    try:
                        reply = msgpack.unpackb(burst.recv(zmq.NOBLOCK), raw=False)
                    except zmq.Again:
                        break
                    answered += 1
                    accepted += bool(reply.get("ok"))
                    submit_ms.append((time.perf_counter() - sent_at[reply.get("id")]) * 1e3)
            if probe in ready:
                probe.recv()
                status_ms.append((time.perf_counter() - probe_t) * 1e3)
                probe_t = time.perf_counter()
                probe.send(msgpack.packb({"op": "status", "id": "nobody"}))
        burst_s = time.perf_counter() - t0
        # The status asked last is part of the burst too: wait for it and count it.
        if probe.poll(30000):
            probe.recv()
            status_ms.append((time.perf_counter() - probe_t) * 1e3)
        return {
            "binary": binary, "submits": args.submits, "accepted": accepted, "prompt_chars": args.prompt_chars,
            "idle_status_p50_ms": pct(idle, 50), "idle_status_p99_ms": pct(idle, 99),
            "status_samples": len(status_ms), "status_p50_ms": pct(status_ms, 50), "status_p99_ms": pct(status_ms, 99),
            "status_max_ms": max(status_ms) if status_ms else float("nan"),
            "submit_p50_ms": pct(submit_ms, 50), "submit_p99_ms": pct(submit_ms, 99), "burst_s": burst_s,
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        ctx.destroy(linger=0)
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", required=True, help="conveyor binary (repeat to compare builds)")
    ap.add_argument("--submits", type=int, default=1000)
    ap.add_argument("--prompt-chars", type=int, default=2000)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--timeout-s", type=int, default=600)
    ap.add_argument("--serve-args", default="", help="more flags for every `conveyor serve` (e.g. \"--worker-threads 1\")")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    rows = []
    for b in args.bin:
        print("measuring %s ..." % b, file=sys.stderr)
        rows.append(measure(b, args))
    head = ["binary", "idle p50", "status p50", "status p99", "status max", "samples", "submit p50", "submit p99", "burst s"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| %s | %.2f | %.2f | %.2f | %.1f | %d | %.1f | %.1f | %.2f |" % (
            r["binary"], r["idle_status_p50_ms"], r["status_p50_ms"], r["status_p99_ms"], r["status_max_ms"],
            r["status_samples"], r["submit_p50_ms"], r["submit_p99_ms"], r["burst_s"]))
    print("(milliseconds; %d submits of %d-character prompts sent at once; `status` asked one after another meanwhile)"
          % (args.submits, args.prompt_chars))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
