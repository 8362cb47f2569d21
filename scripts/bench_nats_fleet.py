#!/usr/bin/env python3
"""Fleet benchmark: `conveyor serve --device sim --nats` replicas (each step sleeps as long as the
h100-llama8b cost model says one H100 takes for Llama-3-8B) behind NATS JetStream on this
machine. Runs 1, 2 and 4 replicas; 2 and 4 again with one replica killed (SIGKILL) midway; and 2
replicas on a three-node JetStream cluster (streams replicated 3x) with one NATS node killed
midway. Every run checks the events stream afterwards: jobs lost, seqs stored twice, gaps.

    .venv/bin/python scripts/bench_nats_fleet.py --jobs 600 --json fleet.json

Prints a table, writes --json. Exit status 1 when a job was lost or a seq repeated.
TTFT is the producer's view: from its publish to the replica's first token (the done event's
ttft, shifted by the time the job waited in JetStream); jobs that failed over have no TTFT.
"""
import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "tests"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

import msgpack  # noqa: E402
import nats  # noqa: E402
import nats.errors  # noqa: E402
import nats.js.errors  # noqa: E402

from nats_fixture import NatsServer, free_port  # noqa: E402


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Replica:
    def __init__(self, binary, url, args, ack_wait):
        cmd = [binary, "serve", "--device", "sim", "--nats", url, "--nats-ack-wait", str(ack_wait),
               "--router", "tcp://127.0.0.1:*", "--pub", "tcp://127.0.0.1:*", "--pull", "tcp://127.0.0.1:*", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines, self.ready = [], threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(60):
            self.kill()
            raise RuntimeError("replica did not start:\n" + "\n".join(self.lines[-20:]))

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            self.lines.append(line)
            if "conveyor serve: NATS" in line:
                self.ready.set()
        self.ready.set()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.kill()
            return None


async def quiet(_e):
    pass


class Cluster:
    """Three nats-server nodes with JetStream, clustered on loopback."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="conveyor-nats-cluster-")
        self.ports = [free_port() for _ in range(3)]
        self.cports = [free_port() for _ in range(3)]
        routes = ",".join("nats://127.0.0.1:%d" % p for p in self.cports)
        self.procs = []
        for i in range(3):
            self.procs.append(subprocess.Popen(
                ["nats-server", "-js", "-sd", os.path.join(self.dir, "n%d" % i), "-a", "127.0.0.1",
                 "-p", str(self.ports[i]), "-n", "n%d" % i, "--cluster_name", "conveyor",
                 "-cluster", "nats://127.0.0.1:%d" % self.cports[i], "-routes", routes],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.url = ",".join("nats://127.0.0.1:%d" % p for p in self.ports)

    async def wait_ready(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                nc = await nats.connect(servers=self.url.split(","), connect_timeout=1, error_cb=quiet,
                                        allow_reconnect=False)
                await nc.jetstream().account_info()
                await nc.close()
                return
            except Exception:
                await asyncio.sleep(0.5)
        raise RuntimeError("the NATS cluster did not elect a JetStream leader within 30 s")

    def kill(self, i):
        self.procs[i].kill()
        self.procs[i].wait()

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                p.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def workload(n, seed, prompt_len):
    rng = random.Random(seed)
    return [{"id": "fleet-%d" % i, "prompt_tokens": [rng.randrange(100, 5000) for _ in range(prompt_len)],
             "max_tokens": rng.randint(32, 256)} for i in range(n)]


async def stored_events(js):
    for attempt in range(10):  # a cluster that just lost a node may answer slowly at first
        try:
            info = await js.stream_info("CONVEYOR_EVENTS")
            sub = await js.subscribe("conveyor.events.>", stream="CONVEYOR_EVENTS", ordered_consumer=True)
            break
        except nats.errors.TimeoutError:
            if attempt == 9:
                raise
            await asyncio.sleep(1.0)
    out = []
    while len(out) < info.state.messages:
        out.append(msgpack.unpackb((await sub.next_msg(timeout=30)).data, raw=False))
    await sub.unsubscribe()
    return out


def check(events, jobs):
    """Jobs lost (no terminal event stored), (id, seq) pairs stored twice, jobs with a seq gap."""
    seqs, ends = {}, {}
    repeated = 0
    for ev in events:
        s = seqs.setdefault(ev["id"], set())
        repeated += ev["seq"] in s
        s.add(ev["seq"])
        if ev["kind"] in ("done", "error"):
            ends[ev["id"]] = ends.get(ev["id"], 0) + 1
    lost = sum(1 for j in jobs if ends.get(j["id"], 0) == 0)
    gaps = sum(1 for j in jobs if j["id"] in seqs and seqs[j["id"]] != set(range(len(seqs[j["id"]]))))
    twice = sum(1 for n in ends.values() if n > 1)
    return lost, repeated, gaps, twice


async def publish(js, subject, data, msg_id, patience_s=30.0):
    """JetStream publish, retried while a (new, replicated) stream has no leader yet."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return await js.publish(subject, data, headers={"Nats-Msg-Id": msg_id})
        except (nats.js.errors.NoStreamResponseError, nats.errors.NoRespondersError, nats.errors.TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


async def one_run(o, name, n_replicas, kill_replica=False, cluster=False):
    server = Cluster() if cluster else NatsServer()
    reps = []
    try:
        if cluster:
            await server.wait_ready()
        extra = ["--max-num-seqs", str(o.max_num_seqs)] + (["--nats-replicas", "3"] if cluster else [])
        reps = [Replica(o.bin, server.url, extra, o.ack_wait) for _ in range(n_replicas)]
        jobs = workload(o.jobs, o.seed, o.prompt_len)
        nc = await nats.connect(servers=server.url.split(","), max_reconnect_attempts=-1, error_cb=quiet)
        js = nc.jetstream()
        ended, sent_at = {}, {}
        sub = await nc.subscribe("conveyor.events.>")
        t0 = time.monotonic()
        for j in jobs:
            sent_at[j["id"]] = time.monotonic()
            await publish(js, "conveyor.jobs", msgpack.packb({"op": "submit", "stream": False, **j}), j["id"])
        killed_at = None
        deadline = time.monotonic() + o.timeout
        while len(ended) < len(jobs) and time.monotonic() < deadline:
            try:
                m = await sub.next_msg(timeout=1)
            except Exception:
                continue
            ev = msgpack.unpackb(m.data, raw=False)
            if ev["kind"] in ("done", "error") and ev["id"] not in ended:
                ended[ev["id"]] = (time.monotonic(), ev)
            if killed_at is None and len(ended) >= len(jobs) // 3 and (kill_replica or cluster):
                killed_at = time.monotonic() - t0
                if cluster:
                    server.kill(2)
                    log("  killed NATS node 2 at %.1f s" % killed_at)
                else:
                    reps[0].kill()
                    log("  killed replica 0 at %.1f s" % killed_at)
        makespan = max((t for t, _ in ended.values()), default=time.monotonic()) - t0
        await asyncio.sleep(1.0)
        lost, repeated, gaps, twice = check(await stored_events(js), jobs)
        await nc.close()
        done = [ev for _, ev in ended.values() if ev["kind"] == "done"]
        ttft = []
        for job_id, (t, ev) in ended.items():
            tm = ev.get("timing") or {}
            if ev["kind"] == "done" and tm.get("ttft_ms") is not None:
                arrived = t - tm["e2e_ms"] / 1000.0  # when the replica took it
                ttft.append((arrived - sent_at[job_id]) + tm["ttft_ms"] / 1000.0)
        out_tokens = sum(ev["usage"]["completion_tokens"] for ev in done)
        row = {"run": name, "replicas": n_replicas, "jobs": len(jobs), "ended": len(ended),
               "lost": lost, "repeated_seqs": repeated, "gaps": gaps, "second_terminal": twice,
               "makespan_s": makespan, "jobs_per_s": len(ended) / makespan if makespan > 0 else 0.0,
               "output_tok_s": out_tokens / makespan if makespan > 0 else 0.0,
               "ttft_p50_s": pct(ttft, 50), "ttft_p90_s": pct(ttft, 90), "killed_at_s": killed_at}
        for r in reps:
            r.stop()
            if o.verbose:
                log("\n".join("  replica: " + line for line in r.lines if "NATS" in line))
        return row
    finally:
        for r in reps:
            r.kill()
        server.close()


def print_table(rows):
    cols = [("run", "run", "%s"), ("replicas", "replicas", "%d"), ("jobs/s", "jobs_per_s", "%.1f"),
            ("output tok/s", "output_tok_s", "%.0f"), ("TTFT p50 s", "ttft_p50_s", "%.2f"),
            ("TTFT p90 s", "ttft_p90_s", "%.2f"), ("makespan s", "makespan_s", "%.1f"),
            ("lost", "lost", "%d"), ("seqs twice", "repeated_seqs", "%d"), ("gaps", "gaps", "%d")]
    print("| " + " | ".join(c[0] for c in cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f % r[k] for _, k, f in cols) + " |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.environ.get("CONVEYOR_BIN", os.path.join(ROOT, "build", "conveyor")))
    p.add_argument("--jobs", type=int, default=600)
    p.add_argument("--prompt-len", type=int, default=256)
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--ack-wait", type=float, default=5.0)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", default="", help="comma-separated run names (1,2,4,2-kill,4-kill,cluster)")
    p.add_argument("--json", default="")
    p.add_argument("--verbose", action="store_true", help="print the replicas' NATS log lines")
    o = p.parse_args(argv)
    plan = [("1", 1, False, False), ("2", 2, False, False), ("4", 4, False, False),
            ("2-kill", 2, True, False), ("4-kill", 4, True, False), ("cluster", 2, False, True)]
    if o.only:
        plan = [x for x in plan if x[0] in o.only.split(",")]
    rows = []
    for name, n, kill, cluster in plan:
        log("run %s: %d replica(s)%s%s" % (name, n, ", one killed midway" if kill else "",
                                          ", 3-node NATS cluster, one node killed midway" if cluster else ""))
        rows.append(asyncio.run(one_run(o, name, n, kill, cluster)))
    print_table(rows)
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"settings": vars(o), "runs": rows}, f, indent=2)
    bad = [r["run"] for r in rows if r["lost"] or r["repeated_seqs"] or r["gaps"] or r["second_terminal"]]
    if bad:
        print("FAILED: jobs lost or seqs repeated in runs %s" % ", ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
