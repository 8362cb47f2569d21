"""End-to-end tests: the Python client against the real `conveyor serve` binary (CPU executor,
SmolLM2), named by the environment variable CONVEYOR_BIN (ctest's python_client test sets it).

One server, started once for the session with ephemeral ports, serves every test but the drain
test, which starts its own. Greedy outputs are checked against `conveyor generate`.
"""
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import msgpack
import pytest
import zmq

from conveyor_client import AsyncClient, Client, ConveyorError, ConveyorTimeout

CONVEYOR_BIN = os.environ.get("CONVEYOR_BIN")
if not CONVEYOR_BIN:
    pytest.skip("CONVEYOR_BIN is not set: these tests need the conveyor binary "
                "(ctest's python_client test sets it to the built one)", allow_module_level=True)

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # clients/python
STARTUP = re.compile(r"conveyor serve: .* router (\S+) pub (\S+) pull (\S+)")
START_TIMEOUT_S = 60.0
MAX_TOKENS = 12
PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little",
    "def fibonacci(n):",
    "The three primary colors are",
]
GREEDY = {"temperature": 0, "max_tokens": MAX_TOKENS}


class Server:
    """A `conveyor serve` child process on ephemeral ports. Its log is read by a thread (kept in
    .log for failure messages) that parses the start-up line."""

    def __init__(self, *extra_args, device="cpu", ports=None):
        """ports: (router, pub, pull) fixed loopback ports, so a restart keeps the endpoints;
        None: ephemeral ones."""
        if not os.path.isfile(CONVEYOR_BIN) or not os.access(CONVEYOR_BIN, os.X_OK):
            raise RuntimeError("CONVEYOR_BIN=%s is not an executable file" % CONVEYOR_BIN)
        # Each server journals into its own fresh directory (never the user's state dir; test
        # job ids repeat across runs) unless the caller names one.
        self._own_state = None
        if "--state-dir" not in extra_args and "--no-journal" not in extra_args:
            self._own_state = tempfile.mkdtemp(prefix="conveyor-test-state-")
            extra_args = ("--state-dir", self._own_state, *extra_args)
        eps = ["tcp://127.0.0.1:%s" % p for p in (ports or ("*", "*", "*"))]
        self.args = [CONVEYOR_BIN, "serve", "--device", device,
                     "--router", eps[0], "--pub", eps[1], "--pull", eps[2], *extra_args]
        self.log = []
        self.router = self.pub = self.pull = None
        self._started = threading.Event()
        # The start-up line is documented on stderr, but spdlog's default logger writes to
        # stdout: read both, merged.
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._reader = threading.Thread(target=self._read_output, daemon=True)
        self._reader.start()
        try:
            self._wait_started()
        except BaseException:
            self.kill()
            raise

    def _read_output(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.log.append(line)
            m = STARTUP.search(line)
            if m and not self._started.is_set():
                self.router, self.pub, self.pull = m.groups()
                self._started.set()
        self._started.set()  # EOF: the process is gone; _wait_started reports it

    def _wait_started(self):
        if not self._started.wait(START_TIMEOUT_S) or self.router is None:
            raise RuntimeError("conveyor serve did not start (exit code %s); log:\n%s"
                               % (self.proc.poll(), self.logs()))
        deadline = time.monotonic() + START_TIMEOUT_S
        with self.client(request_timeout=1.0, retries=0) as c:
            while True:
                try:
                    health = c.health()
                    break
                except ConveyorTimeout:
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        raise RuntimeError("conveyor serve does not answer health; log:\n%s"
                                           % self.logs())
        assert health["status"] == "serving" and health["protocol"] == 1, health

    def logs(self):
        return "\n".join(self.log[-40:])

    def client(self, **kw):
        return Client(self.router, self.pub, **kw)

    def stop(self, timeout):
        """SIGTERM, then the exit code (None if it did not exit within timeout seconds)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        if self._own_state:
            shutil.rmtree(self._own_state, ignore_errors=True)


@pytest.fixture(scope="session")
def live_server():
    """The real server, shared by the tests of this module."""
    s = Server()
    try:
        yield s
        code = s.stop(timeout=30)
        assert code == 0, "conveyor serve exit code %s after SIGTERM; log:\n%s" % (code, s.logs())
    finally:
        s.kill()


@pytest.fixture(scope="session")
def goldens():
    """`conveyor generate`'s greedy completion of every prompt (its stdout is the text and one
    newline). The processes run concurrently."""
    procs = {p: subprocess.Popen([CONVEYOR_BIN, "generate", "--model", "smollm2", "--prompt", p,
                                  "--temperature", "0", "--max-tokens", str(MAX_TOKENS)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for p in PROMPTS}
    out = {}
    for prompt, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, "conveyor generate failed: %s" % stderr.decode()
        text = stdout.decode("utf-8")
        assert text.endswith("\n"), repr(text)
        out[prompt] = text[:-1]
        assert out[prompt], "empty completion for %r" % prompt
    return out


def check_job(events, job_id, max_tokens=MAX_TOKENS, reasons=("length", "stop")):
    """A complete stream: seq 0.. without gaps, accepted, tokens..., one terminal done event
    whose text is the concatenated deltas. Returns the done event."""
    assert [e["seq"] for e in events] == list(range(len(events))), job_id
    assert all(e["id"] == job_id for e in events)
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "accepted" and kinds[-1] == "done", (job_id, kinds)
    assert set(kinds[1:-1]) <= {"tokens"}, (job_id, kinds)
    done = events[-1]
    deltas = events[1:-1]
    assert "".join(e["text"] for e in deltas) == done["text"]
    produced = sum(len(e["token_ids"]) for e in deltas)
    assert done["usage"]["completion_tokens"] == produced
    assert done["finish_reason"] in reasons, done
    if done["finish_reason"] == "length":
        assert produced == max_tokens
    return done


def check_nothing_after(client, job_id, n_events):
    """The server's history for the job ends at its terminal event."""
    st = client.status(job_id)
    assert st["next_seq"] == n_events and st["state"] == "finished", st
    reply = client.fetch(job_id, from_seq=n_events)
    assert reply["events"] == [], reply


def test_two_producers_submit_at_once_and_match_generate(live_server, goldens):
    jobs_each = 8
    barrier = threading.Barrier(2)
    results, errors = {}, []

    def producer(p):
        try:
            with live_server.client(request_timeout=10.0) as c:
                barrier.wait(timeout=30)
                ids = {}
                for i in range(jobs_each):
                    prompt = PROMPTS[(i + p) % len(PROMPTS)]
                    ids[c.submit(prompt, id="prod-%d/%d" % (p, i), **GREEDY)] = prompt
                for job_id, prompt in ids.items():
                    events = list(c.stream(job_id, timeout=60))
                    check_nothing_after(c, job_id, len(events))
                    results[job_id] = (prompt, events)
        except BaseException as e:  # re-raised in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=producer, args=(p,)) for p in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]
    assert not any(t.is_alive() for t in threads)
    assert len(results) == 2 * jobs_each
    for job_id, (prompt, events) in sorted(results.items()):
        done = check_job(events, job_id)
        assert done["text"] == goldens[prompt], (job_id, prompt)


def test_async_client_concurrent_generate(live_server, goldens):
    async def main():
        async with AsyncClient(live_server.router, live_server.pub) as c:
            return await asyncio.wait_for(
                asyncio.gather(*(c.generate(p, id="async-%d" % i, **GREEDY)
                                 for i, p in enumerate(PROMPTS))), 60)

    texts = asyncio.run(main())
    assert texts == [goldens[p] for p in PROMPTS]


def test_conveyor_pipe_end_to_end(live_server, goldens):
    jobs = [dict(id="pipe/%d" % i, prompt=PROMPTS[i % len(PROMPTS)], **GREEDY) for i in range(20)]
    stdin = "".join(json.dumps(j) + "\n" for j in jobs)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [PACKAGE_DIR] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.run([sys.executable, "-m", "conveyor_client.pipe", "--router", live_server.router,
                           "--pub", live_server.pub, "--max-in-flight", "8", "--quiet"],
                          input=stdin.encode(), capture_output=True, timeout=600, env=env)  # a hang guard: sanitizer builds are slow
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode("utf-8").splitlines()
    assert len(lines) == 20, lines
    records = {r["id"]: r for r in map(json.loads, lines)}
    assert sorted(records) == sorted(j["id"] for j in jobs)
    for job in jobs:
        r = records[job["id"]]
        assert "error" not in r, r
        assert r["finish_reason"] in ("length", "stop"), r
        assert r["text"] == goldens[job["prompt"]], r
        assert 1 <= r["usage"]["completion_tokens"] <= MAX_TOKENS


def test_late_joiner_gets_every_event_through_fetch(live_server):
    with live_server.client() as a, live_server.client() as b:
        job_id = a.submit(PROMPTS[0], id="late/1", **GREEDY)
        first = list(a.stream(job_id, timeout=60))
        check_job(first, job_id)
        # b never subscribed while the job ran: only fetch can give it the events.
        late = list(b.stream(job_id, timeout=10))
        assert late == first
        # And from the middle of the history.
        assert list(b.stream(job_id, timeout=10, from_seq=2)) == first[2:]


def test_n_choices_over_zeromq(live_server):
    """Client.generate_n: choice i is the job with seed + i; the later choices hit the prefix cache."""
    prompt = "A list of rivers, one per line, with a note on each: Nile, Amazon, Danube, " * 2
    params = dict(max_tokens=8, temperature=0.9, top_p=0.95, seed=11)
    with live_server.client() as c:
        texts = c.generate_n(3, prompt, id="n3", **params)
        assert texts == [c.generate(prompt, **dict(params, seed=11 + i)) for i in range(3)]
        assert len(set(texts)) > 1
        done = [e for e in c.fetch("n3/2")["events"] if e["kind"] == "done"][0]
        assert done["usage"]["cached_tokens"] >= 16, done
        with pytest.raises(ValueError):
            c.generate_n(17, prompt)


@pytest.fixture
def drain_server():
    s = Server("--drain-timeout", "1")
    try:
        yield s
    finally:
        s.kill()


def test_sigterm_while_busy_drains_and_exits_0(drain_server):
    s = drain_server
    ctx = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)  # a raw subscriber sees every event the server publishes
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"job/")
    sub.setsockopt(zmq.SUBSCRIBE, b"sys/")
    sub.connect(s.pub)
    events = {}  # id -> [event, ...] in arrival order

    def receive(until, timeout_s):
        deadline = time.monotonic() + timeout_s
        while not until():
            left = deadline - time.monotonic()
            assert left > 0, "timed out; events so far %s; log:\n%s" % (
                {k: [e["kind"] for e in v] for k, v in events.items()}, s.logs())
            if sub.poll(int(left * 1000) + 1):
                topic, data = sub.recv_multipart()
                ev = msgpack.unpackb(data, raw=False)
                if topic.startswith(b"job/"):
                    events.setdefault(ev["id"], []).append(ev)
                else:
                    receive.heartbeats += 1
    receive.heartbeats = 0

    try:
        receive(lambda: receive.heartbeats > 0, 5)  # the subscription is live
        ids = []
        with s.client(request_timeout=2.0, retries=0) as c:
            for i in range(4):
                ids.append(c.submit("Write a long story about a lighthouse keeper number %d." % i,
                                    id="drain/%d" % i, max_tokens=2000, ignore_eos=True,
                                    temperature=0))
        # Every job is running (has produced a token) before the signal.
        receive(lambda: all(any(e["kind"] == "tokens" for e in events.get(j, ())) for j in ids),
                30)
        t_signal = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)

        with s.client(request_timeout=1.0, retries=0) as c:
            # The drain starts: health says draining, or the server is gone already.
            draining = False
            while not draining:
                try:
                    draining = c.health()["status"] == "draining"
                except ConveyorTimeout:
                    break
                assert time.monotonic() - t_signal < 10, "never draining: %s" % s.logs()
            if draining:
                with pytest.raises((ConveyorError, ConveyorTimeout)) as refused:
                    c.submit(PROMPTS[0], id="drain/late", max_tokens=4)
                if not isinstance(refused.value, ConveyorTimeout):
                    assert refused.value.code == "shutting_down", refused.value

        code = s.proc.wait(timeout=1 + 10)
        elapsed = time.monotonic() - t_signal
        assert code == 0, "exit code %s; log:\n%s" % (code, s.logs())
        assert elapsed < 1 + 10, elapsed
        # Every accepted job's terminal event was published before the exit.
        receive(lambda: all(events[j] and events[j][-1]["kind"] in ("done", "error")
                            for j in ids), 5)
        while sub.poll(0):  # whatever else arrived
            topic, data = sub.recv_multipart()
            if topic.startswith(b"job/"):
                ev = msgpack.unpackb(data, raw=False)
                events.setdefault(ev["id"], []).append(ev)
        assert "drain/late" not in events
        for job_id in ids:
            # Published live to a subscriber that was there from the start: nothing lost here.
            done = check_job(events[job_id], job_id, max_tokens=2000,
                             reasons=("cancelled", "length"))
            assert done["usage"]["completion_tokens"] >= 1
    finally:
        sub.close(0)
