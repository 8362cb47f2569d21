"""Chaos harness, part 1: `conveyor serve` as a process killed with SIGKILL and restarted on the
same state dir and endpoints (Server), a DEALER that retries across the kills (Requester), and a
raw SUB socket that records every event live (Recorder).

The harness is shared by tests/test_chaos.py (CI) and scripts/chaos_bench.py:
chaos_run.run_chaos() drives a run (load, kills, restarts) and chaos_check.check_run() judges it
against the journal's promise (every accepted job finishes exactly once, its seqs without gap or
repeat, its text consistent across the restarts).
"""
import collections
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import msgpack
import zmq

STARTUP = re.compile(r"conveyor serve: .* router (\S+) pub (\S+) pull (\S+)")
JOURNAL = re.compile(r"(\d+) finished jobs remembered, (\d+) resumed, (\d+) ended as poison")
TERMINAL = ("done", "error")



def log(msg):
    print("[chaos %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def free_ports(n):
    """n distinct free loopback TCP ports, below the kernel's ephemeral range: while the server is
    down, the clients' reconnecting sockets take source ports from that range, and one could hold
    a port the restart must bind."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng, ports = random.Random(), []
    while len(ports) < n:
        port = rng.randrange(10000, max(low, 10000 + 1000))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in ports:
            ports.append(port)
    return ports


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def unpack_fetch(data):
    """A fetch reply, and the raw bytes of each of its events as the server encoded them (so they
    can be compared byte for byte with what the PUB socket carried)."""
    u = msgpack.Unpacker(raw=False)
    u.feed(data)
    reply, raw = {}, []
    for _ in range(u.read_map_header()):
        key = u.unpack()
        if key != "events":
            reply[key] = u.unpack()
            continue
        for _ in range(u.read_array_header()):
            start = u.tell()
            u.skip()
            raw.append(data[start:u.tell()])
        reply[key] = [msgpack.unpackb(r, raw=False) for r in raw]
    return reply, raw


class Server:
    """`conveyor serve` on fixed loopback endpoints and one state dir, restartable. Each
    incarnation's output goes to log_dir/serve-<n>.log and its tail stays in memory."""

    def __init__(self, binary, state_dir, log_dir, extra_args=()):
        self.binary, self.state_dir, self.log_dir = binary, state_dir, log_dir
        ports = free_ports(3)
        self.router, self.pub, self.pull = ("tcp://127.0.0.1:%d" % p for p in ports)
        self.extra_args = list(extra_args)
        self.incarnation = 0
        self.proc = None
        self.tails = {}            # incarnation -> deque of its last lines
        self.serving_s = []        # per start: seconds from spawn to answering health "serving"
        self.journal_lines = []    # per start: (remembered, resumed, poisoned)
        self.ctx = zmq.Context.instance()

    def args(self):
        return [self.binary, "serve", "--device", "cpu", "--state-dir", self.state_dir,
                "--router", self.router, "--pub", self.pub, "--pull", self.pull, *self.extra_args]

    def start(self, timeout_s=60.0, kill_after_s=None):
        """Spawns the next incarnation and returns its spawn-to-serving seconds; with kill_after_s
        it is SIGKILLed that long after the spawn instead, during its start-up (returns None)."""
        for _ in range(120):  # the binary may be mid-rebuild
            if os.access(self.binary, os.X_OK):
                break
            time.sleep(0.5)
        self.incarnation += 1
        n = self.incarnation
        tail = self.tails[n] = collections.deque(maxlen=60)
        started = threading.Event()
        t0 = time.monotonic()
        self.proc = proc = subprocess.Popen(self.args(), stdin=subprocess.DEVNULL,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

        def read():
            with open(os.path.join(self.log_dir, "serve-%d.log" % n), "w") as f:
                for raw in proc.stdout:
                    line = raw.decode("utf-8", "replace").rstrip("\n")
                    f.write(line + "\n")
                    tail.append(line)
                    m = STARTUP.search(line)
                    if m and m.groups() != (self.router, self.pub, self.pull):
                        tail.append("chaos: unexpected endpoints %s" % (m.groups(),))
                    m = JOURNAL.search(line)
                    if m:
                        self.journal_lines.append(tuple(int(x) for x in m.groups()))
                        started.set()
            started.set()
        threading.Thread(target=read, daemon=True).start()
        if kill_after_s is not None:
            time.sleep(kill_after_s)
            self.kill9()
            return None
        if not started.wait(timeout_s) or proc.poll() is not None:
            raise RuntimeError("server %d did not start (exit %s):\n%s" % (n, proc.poll(), self.logs()))
        dealer, deadline = None, t0 + timeout_s
        try:
            while True:
                if dealer is not None:
                    dealer.close(0)
                dealer = self.ctx.socket(zmq.DEALER)
                dealer.setsockopt(zmq.LINGER, 0)
                dealer.connect(self.router)
                dealer.send(pack({"op": "health"}))
                if dealer.poll(200) and msgpack.unpackb(dealer.recv()).get("status") == "serving":
                    break
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("server %d never served (exit %s):\n%s"
                                       % (n, proc.poll(), self.logs()))
        finally:
            dealer.close(0)
        self.serving_s.append(time.monotonic() - t0)
        return self.serving_s[-1]

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait()

    def stop(self):
        """SIGTERM (drain), SIGKILL after 30 s; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill9()
            return self.proc.returncode

    def logs(self, incarnations=3, lines=25):
        out = []
        for n in sorted(self.tails)[-incarnations:]:
            out.append("--- server incarnation %d (%s) ---" % (n, " ".join(self.args())))
            out.extend(list(self.tails[n])[-lines:])
        return "\n".join(out)


class Requester:
    """A DEALER with lazy-pirate retries: on no reply within timeout_s it closes the socket, opens
    a fresh one and resends, until give_up_s. One per thread."""

    def __init__(self, server, timeout_s=2.0, give_up_s=60.0):
        self.server, self.timeout_s, self.give_up_s = server, timeout_s, give_up_s
        self.dealer = None

    def _open(self):
        if self.dealer is not None:
            self.dealer.close(0)
        self.dealer = self.server.ctx.socket(zmq.DEALER)
        self.dealer.setsockopt(zmq.LINGER, 0)
        self.dealer.connect(self.server.router)

    def call_raw(self, msg):
        """(reply bytes, number of attempts)."""
        deadline, data = time.monotonic() + self.give_up_s, pack(msg)
        attempts = 0
        while time.monotonic() < deadline:
            if self.dealer is None or attempts > 0:
                self._open()
            attempts += 1
            self.dealer.send(data)
            if self.dealer.poll(int(self.timeout_s * 1000)):
                return self.dealer.recv(), attempts
        raise TimeoutError("no reply to %s %s in %.0f s" % (msg.get("op"), msg.get("id"), self.give_up_s))

    def call(self, msg):
        data, attempts = self.call_raw(msg)
        return msgpack.unpackb(data, raw=False), attempts

    def fetch_all(self, job_id):
        """(every event map, their raw bytes, complete) from seq 0, or None when not_found."""
        events, raw = [], []
        while True:
            reply, r = unpack_fetch(self.call_raw({"op": "fetch", "id": job_id, "from_seq": len(raw),
                                                   "max_events": 4096})[0])
            if not reply.get("ok"):
                return None
            events += reply["events"]
            raw += r
            if reply["complete"] or not r:
                return events, raw, reply["complete"]

    def close(self):
        if self.dealer is not None:
            self.dealer.close(0)


class Recorder(threading.Thread):
    """A raw SUB on "job/" and "sys/": every job event as it arrives, with its arrival index."""

    def __init__(self, server):
        super().__init__(daemon=True)
        self.server = server
        self.live = collections.defaultdict(list)  # id -> [(arrival, seq, raw, event)]
        self.terminal = set()
        self.heartbeats = self.arrivals = 0
        self.bad_frames = []
        self._halt = threading.Event()

    def run(self):
        sub = self.server.ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.RCVHWM, 0)
        sub.setsockopt(zmq.SUBSCRIBE, b"job/")
        sub.setsockopt(zmq.SUBSCRIBE, b"sys/")
        sub.connect(self.server.pub)
        try:
            while not self._halt.is_set():
                if not sub.poll(100):
                    continue
                frames = sub.recv_multipart()
                if len(frames) != 2:
                    self.bad_frames.append(frames)
                    continue
                topic, data = frames
                ev = msgpack.unpackb(data, raw=False)
                if topic == b"sys/":
                    self.heartbeats += 1
                    continue
                if topic != ("job/%s/" % ev.get("id")).encode():
                    self.bad_frames.append(frames)
                self.arrivals += 1
                self.live[ev["id"]].append((self.arrivals, ev["seq"], data, ev))
                if ev["kind"] in TERMINAL:
                    self.terminal.add(ev["id"])
        finally:
            sub.close(0)

    def wait_live(self, timeout_s=10.0):
        """Until a heartbeat arrived: the subscription has reached the server."""
        seen, deadline = self.heartbeats, time.monotonic() + timeout_s
        while self.heartbeats == seen and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self):
        self._halt.set()
        self.join(5)
