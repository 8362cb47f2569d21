"""Soak (issue 26): mixed traffic against `conveyor serve --device null` with the journal on, for
a number of phases, the server killed (SIGKILL, jobs still running) and restarted on the same
state dir between phases. The traffic:

- pipelined DEALERs (32 requests in flight each), about 30% of the submits with `deadline_ms`
  1..5: every request must get exactly one reply (a missing reply stalled every later request of
  that DEALER before the fix of defect 1);
- PUSHes of fire-and-forget submits;
- HTTP /v1/completions with X-Request-Id values reused on purpose (retries) and short client
  timeouts (a timed-out request is retried under the same id).

Between phases the producers stop sending and wait for their replies, then the server is
SIGKILLed; the next incarnation resumes what was running. At the end every job that was accepted
(an ok reply, a PUSH, an HTTP 200) must be complete in `fetch`, its seqs 0..n-1 with one terminal
event last, and the server's logs must hold no refused journal write and no self-stop.

run_soak() is shared by tests/test_soak.py (CI, short) and scripts/soak.py (10 minutes).
"""
import collections
import json
import os
import random
import threading
import time
import urllib.error
import urllib.request

import msgpack
import zmq

from chaos_harness import Requester, Server, free_ports, log, pack

INFLIGHT = 32
REPLY_TIMEOUT_S = 5.0


class SoakServer(Server):
    """chaos_harness.Server on the null executor with a fixed HTTP port as well."""

    def __init__(self, binary, state_dir, log_dir):
        super().__init__(binary, state_dir, log_dir)
        self.http_port = free_ports(1)[0]
        self.http = "http://127.0.0.1:%d" % self.http_port

    def args(self):
        a = super().args()
        a[a.index("--device") + 1] = "null"
        return a + ["--http-port", str(self.http_port), "--num-kv-blocks", "20000", "--max-num-seqs", "256", "--retention", "7200",
                    "--drain-timeout", "0"]


class Dealer(threading.Thread):
    """One DEALER, up to INFLIGHT submits in flight, at most `rate` submits a second on average
    (the server keeps 100,000 ended jobs fetchable: the check at the end needs them all); every
    request must get exactly one reply."""

    def __init__(self, server, rng, prefix, stats, rate):
        super().__init__(daemon=True)
        self.server, self.rng, self.prefix, self.stats, self.rate = server, rng, prefix, stats, rate
        self.pausing = threading.Event()
        self.paused = threading.Event()
        self.halt = threading.Event()
        self.accepted = set()
        self.n = 0

    def run(self):
        sock = None
        try:
            while not self.halt.is_set():
                sock = self.server.ctx.socket(zmq.DEALER)
                sock.setsockopt(zmq.LINGER, 0)
                sock.connect(self.server.router)
                outstanding = collections.OrderedDict()  # id -> sent at
                t0, sent0 = time.monotonic(), self.n
                while not self.pausing.is_set() or outstanding:
                    under_rate = (self.n - sent0) < self.rate * (time.monotonic() - t0 + 0.1)
                    while not self.pausing.is_set() and len(outstanding) < INFLIGHT and under_rate:
                        self.n += 1
                        jid = "%s/%d" % (self.prefix, self.n)
                        job = {"op": "submit", "id": jid, "prompt": "soak", "max_tokens": self.rng.randint(1, 16),
                               "ignore_eos": True}
                        if self.rng.random() < 0.3:
                            job["deadline_ms"] = self.rng.randint(1, 5)
                        sock.send(pack(job))
                        outstanding[jid] = time.monotonic()
                        self.stats["zmq_sent"] += 1
                    if sock.poll(50):
                        r = msgpack.unpackb(sock.recv(), raw=False)
                        jid = r.get("id")
                        if jid not in outstanding:
                            self.stats["zmq_unexpected_replies"] += 1
                            continue
                        del outstanding[jid]
                        self.stats["zmq_replies"] += 1
                        if r.get("ok"):
                            self.accepted.add(jid)
                        else:
                            self.stats["zmq_refused_" + r.get("error", {}).get("code", "?")] += 1
                    now = time.monotonic()
                    for jid, t in list(outstanding.items()):
                        if now - t > REPLY_TIMEOUT_S:
                            self.stats["zmq_no_reply"] += 1
                            log("no reply to %s within %.0f s" % (jid, REPLY_TIMEOUT_S))
                            del outstanding[jid]
                sock.close(0)
                sock = None
                self.paused.set()
                while self.pausing.is_set() and not self.halt.is_set():
                    time.sleep(0.02)
                self.paused.clear()
        finally:
            if sock is not None:
                sock.close(0)


class Pusher(threading.Thread):
    def __init__(self, server, rng, prefix, stats):
        super().__init__(daemon=True)
        self.server, self.rng, self.prefix, self.stats = server, rng, prefix, stats
        self.pausing, self.paused, self.halt = threading.Event(), threading.Event(), threading.Event()
        self.pushed = []

    def run(self):
        while not self.halt.is_set():
            sock = self.server.ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 2000)
            sock.connect(self.server.pull)
            while not self.pausing.is_set():
                jid = "%s/%d" % (self.prefix, len(self.pushed))
                sock.send(pack({"op": "submit", "id": jid, "prompt": "soak", "max_tokens": self.rng.randint(1, 8),
                                "ignore_eos": True}))
                self.pushed.append(jid)
                self.stats["push_sent"] += 1
                time.sleep(self.rng.uniform(0.02, 0.06))
            sock.close()  # linger: what was sent reaches the server before it is killed
            self.paused.set()
            while self.pausing.is_set() and not self.halt.is_set():
                time.sleep(0.02)
            self.paused.clear()


class HttpClient(threading.Thread):
    """Completions with reused ids and short timeouts: a timed-out id is retried until a 200."""

    def __init__(self, server, rng, prefix, stats, rate):
        super().__init__(daemon=True)
        self.server, self.rng, self.prefix, self.stats, self.rate = server, rng, prefix, stats, rate
        self.pausing, self.paused, self.halt = threading.Event(), threading.Event(), threading.Event()
        self.done = set()
        self.n = 0

    def post(self, jid, timeout):
        body = json.dumps({"prompt": "soak", "max_tokens": self.rng.randint(1, 24), "ignore_eos": True}).encode()
        req = urllib.request.Request(self.server.http + "/v1/completions", data=body, method="POST",
                                     headers={"Content-Type": "application/json", "X-Request-Id": jid})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                json.loads(r.read())
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return None  # timed out or connection refused

    def run(self):
        pending = None
        while not self.halt.is_set():
            if self.pausing.is_set() and pending is None:
                self.paused.set()
                while self.pausing.is_set() and not self.halt.is_set():
                    time.sleep(0.02)
                self.paused.clear()
                continue
            if pending is None:
                self.n += 1
                pending = "%s/%d" % (self.prefix, self.n)
            # Sometimes a finished id is sent again: it must attach, not run twice.
            jid = self.rng.choice(sorted(self.done)) if self.done and self.rng.random() < 0.2 else pending
            # A third of the requests give up almost at once (the job runs on: it has a request
            # id) and are retried under the same id, which must attach to the job.
            status = self.post(jid, self.rng.uniform(0.001, 0.01) if self.rng.random() < 0.33 else self.rng.uniform(0.2, 3.0))
            self.stats["http_requests"] += 1
            time.sleep(self.rng.uniform(0, 2.0 / self.rate))
            if status is None:
                self.stats["http_client_timeouts"] += 1
                continue
            self.stats["http_%d" % status] += 1
            if status == 200 and jid == pending:
                self.done.add(pending)
                pending = None


def check_job(req, jid, problems):
    got = req.fetch_all(jid)
    if got is None:
        problems.append("%s: accepted but unknown to fetch" % jid)
        return 0
    events, _, complete = got
    if not complete:
        problems.append("%s: not complete (%d events)" % (jid, len(events)))
    seqs = [e["seq"] for e in events]
    if seqs != list(range(len(events))):
        problems.append("%s: seqs %s" % (jid, seqs[:20]))
    if events and events[0]["kind"] != "accepted":
        problems.append("%s: first event %s" % (jid, events[0]["kind"]))
    terminals = [e for e in events if e["kind"] in ("done", "error")]
    if len(terminals) != 1 or events[-1] is not terminals[-1]:
        problems.append("%s: %d terminal events" % (jid, len(terminals)))
    return len(events)


def run_soak(binary, work_dir, seed, phases=4, phase_s=20.0, dealers=3, pushers=1, http_clients=4, zmq_rate=None):
    """zmq_rate: submits a second per DEALER. The rates keep every job of the run fetchable for
    the check at the end (the server retains 100,000 ended jobs): 40,000 ZeroMQ submits and 20,000
    HTTP requests per run by default, whatever its length."""
    if zmq_rate is None:
        zmq_rate = 40000.0 / (dealers * phases * phase_s)
    http_rate = 20000.0 / (max(1, http_clients) * phases * phase_s)
    rng = random.Random(seed)
    state, logs = os.path.join(work_dir, "state"), os.path.join(work_dir, "logs")
    os.makedirs(logs, exist_ok=True)
    server = SoakServer(binary, state, logs)
    stats = collections.Counter()
    t0 = time.monotonic()
    server.start()
    workers = ([Dealer(server, random.Random(rng.random()), "soak-z%d" % i, stats, zmq_rate) for i in range(dealers)] +
               [Pusher(server, random.Random(rng.random()), "soak-p%d" % i, stats) for i in range(pushers)] +
               [HttpClient(server, random.Random(rng.random()), "soak-h%d" % i, stats, http_rate) for i in range(http_clients)])
    for w in workers:
        w.start()
    restarts = 0
    for phase in range(phases):
        time.sleep(phase_s)
        for w in workers:
            w.pausing.set()
        for w in workers:
            if not w.paused.wait(60):
                stats["workers_stuck"] += 1
        if phase + 1 < phases:
            log("phase %d over: %s; kill -9 and restart" % (phase, dict(stats)))
            server.kill9()
            server.start()
            restarts += 1
            for w in workers:
                w.pausing.clear()
    load_s = time.monotonic() - t0
    # Let the last incarnation finish what it holds, then check every accepted job.
    req = Requester(server, timeout_s=5.0)
    accepted = set()
    for w in workers:
        accepted |= getattr(w, "accepted", set()) | set(getattr(w, "pushed", [])) | getattr(w, "done", set())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        s, _ = req.call({"op": "stats"})
        if s.get("running", 0) == 0 and s.get("queued", 0) == 0:
            break
        time.sleep(0.2)
    problems, events = [], 0
    for jid in sorted(accepted):
        events += check_job(req, jid, problems)
    req.close()
    for w in workers:
        w.halt.set()
    server.stop()
    log_text = ""
    for name in sorted(os.listdir(logs)):
        with open(os.path.join(logs, name)) as f:
            log_text += f.read()
    journal_refusals = log_text.count("could not store job")
    self_stops = log_text.count("journal write failed") + log_text.count("stopping (jobs resume")
    report = {
        "seed": seed, "zmq_rate_per_dealer": round(zmq_rate, 1), "phases": phases, "phase_s": phase_s, "restarts": restarts, "load_s": round(load_s, 1),
        "wall_s": round(time.monotonic() - t0, 1), "accepted_jobs": len(accepted), "events_checked": events,
        "requests_without_exactly_one_reply": stats["zmq_no_reply"] + stats["zmq_unexpected_replies"],
        "journal_refused_writes": journal_refusals, "server_self_stops": self_stops,
        "jobs_lost_or_broken": len(problems), "problems": problems[:50], "counts": dict(stats),
    }
    return report
