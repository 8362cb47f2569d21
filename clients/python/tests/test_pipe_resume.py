"""conveyor-pipe --resume: deterministic ids, re-attaching to known jobs after the pipe died,
waiting out a server restart. The tests marked `needs_bin` run the real server (CONVEYOR_BIN,
null device, journal in a temporary state dir, fixed ports so a restart keeps its endpoints)."""
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conveyor_client import ConveyorError
from conveyor_client.pipe import parse_args, resume_id, run
from conveyor_client.protocol import valid_id
from chaos_harness import free_ports
from fake_server import FakeServer

CONVEYOR_BIN = os.environ.get("CONVEYOR_BIN")
needs_bin = pytest.mark.skipif(not CONVEYOR_BIN, reason="CONVEYOR_BIN is not set")
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_JOBS = 30   # null device, 3000-9000 tokens: some 0.1-0.4 s per job, 4 at a time


def pipe(router, pub, lines, *flags):
    args = parse_args(["--router", router, "--pub", pub, *flags])
    stdout, stderr = io.StringIO(), io.StringIO()
    status = run(args, io.StringIO("".join(l + "\n" for l in lines)), stdout, stderr)
    return status, [json.loads(l) for l in stdout.getvalue().splitlines()], stderr.getvalue()


# --- without the server ---------------------------------------------------------------------
def test_resume_ids_are_stable_and_distinct():
    job = {"prompt": "hi", "max_tokens": 4, "stop": ["\n"]}
    a = resume_id(job, 3)
    assert a == resume_id(json.loads(json.dumps(job)), 3) and a.startswith("pipe-")
    assert valid_id(a)
    assert a == resume_id({"stop": ["\n"], "max_tokens": 4, "prompt": "hi"}, 3)  # key order
    ids = [resume_id(job, n) for n in range(1, 200)] + [resume_id(dict(job, prompt="ho"), 3)]
    assert len(set(ids)) == len(ids)   # the same line at another line number: another id
    # A rerun (another process) names the same jobs.
    code = "from conveyor_client.pipe import resume_id; print(resume_id(%r, 3))" % (job,)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=PACKAGE_DIR, PYTHONHASHSEED="123"))
    assert out.stdout.strip() == a


def test_rerun_with_resume_reattaches_instead_of_running_again():
    lines = [json.dumps({"prompt": "same prompt"})] * 3 + [json.dumps({"id": "x", "prompt": "xyz"})]
    with FakeServer() as server:
        s1, first, _ = pipe(server.router, server.pub, lines, "--resume", "--quiet")
        s2, second, err = pipe(server.router, server.pub, lines, "--resume")
        s3, third, _ = pipe(server.router, server.pub, lines, "--quiet")  # without: as before
        assert len(server.jobs) == 4 + 3   # the run without --resume made up new ids
    assert s1 == s2 == 0 and s3 == 1
    key = lambda r: r["id"]
    assert sorted(first, key=key) == sorted(second, key=key) and len({r["id"] for r in first}) == 4
    assert "4/4 done, 0 failed, 0 in flight, 4 re-attached" in err
    assert sorted(r.get("error", {}).get("code", "ok") for r in third) == ["duplicate"] + ["ok"] * 3


def test_an_unreachable_server_is_given_up_on_with_one_line_per_job():
    t0 = time.monotonic()
    lines = [json.dumps({"id": "u%d" % i, "prompt": "p"}) for i in range(3)] + ["bad"]
    status, results, _ = pipe("tcp://127.0.0.1:9", "tcp://127.0.0.1:9", lines, "--resume",
                              "--quiet", "--request-timeout", "0.1", "--resume-timeout", "0.5")
    assert status == 1 and time.monotonic() - t0 < 10
    assert sorted((r["id"] or "-", r["error"]["code"]) for r in results) == [
        ("-", "bad_request"), ("u0", "timeout"), ("u1", "timeout"), ("u2", "timeout")]


# --- against the real server ----------------------------------------------------------------
if CONVEYOR_BIN:
    from test_e2e import Server

    class JournaledServer(Server):
        """test_e2e's Server on fixed ports, null device, journal in state_dir."""

        def __init__(self, state_dir, ports, *extra):
            super().__init__("--state-dir", state_dir, *extra, device="null", ports=ports)


@pytest.fixture
def journaled(tmp_path):
    """start() -> a JournaledServer; every call reuses the state dir and the ports."""
    ports, servers = free_ports(3), []

    def start():
        servers.append(JournaledServer(str(tmp_path / "state"), ports))
        return servers[-1]
    yield start
    for s in servers:
        s.kill()


class PipeProcess:
    """conveyor-pipe as a child process; its stdout lines are collected by a thread."""

    def __init__(self, server, jobs, *flags):
        env = dict(os.environ, PYTHONPATH=PACKAGE_DIR)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "conveyor_client.pipe", "--router", server.router,
             "--pub", server.pub, *flags], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.proc.stdin.write("".join(json.dumps(j) + "\n" for j in jobs).encode())
        self.proc.stdin.close()
        self.lines = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(
            json.loads(l) for l in self.proc.stdout), daemon=True)
        self._reader.start()

    def wait_lines(self, n, timeout=30):
        deadline = time.monotonic() + timeout
        while len(self.lines) < n:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.proc.kill()
                pytest.fail("the pipe wrote %d lines, not %d" % (len(self.lines), n))
            time.sleep(0.005)

    def finish(self, timeout=60):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self._reader.join(5)
        return self.proc.returncode, self.lines, self.proc.stderr.read().decode()


def make_jobs():
    """Jobs of different lengths, so that they end one by one and some are always running."""
    return [{"prompt": "job number %d" % i, "max_tokens": 3000 * (1 + i % 3), "ignore_eos": True}
            for i in range(N_JOBS)]


def check_finished_once(client, job, record):
    """The job ran once: its history is accepted + done, its tokens exactly max_tokens, and the
    done event is the line the pipe wrote."""
    job_id = record["id"]
    assert "error" not in record, record
    assert record["finish_reason"] == "length"
    assert record["usage"]["completion_tokens"] == job["max_tokens"], record
    st = client.status(job_id)
    assert st["state"] == "finished" and st["next_seq"] == 2, st
    events = client.fetch(job_id)["events"]
    assert [e["kind"] for e in events] == ["accepted", "done"] and events[1]["seq"] == 1
    assert {k: events[1][k] for k in ("text", "usage", "timing")} == \
        {k: record[k] for k in ("text", "usage", "timing")}


@needs_bin
def test_pipe_killed_midway_then_rerun_with_resume(journaled):
    server = journaled()
    jobs = make_jobs()
    ids = [resume_id(j, n) for n, j in enumerate(jobs, 1)]
    by_id = dict(zip(ids, jobs))
    first = PipeProcess(server, jobs, "--resume", "--max-in-flight", "4", "--quiet")
    first.wait_lines(8)
    first.proc.send_signal(signal.SIGKILL)
    done1 = {r["id"]: r for r in first.finish()[1]}
    assert 8 <= len(done1) < N_JOBS
    with server.client(request_timeout=5) as c:
        deadline = time.monotonic() + 30
        while c.stats()["running"] or c.stats()["queued"]:   # what the dead pipe left runs on
            assert time.monotonic() < deadline
            time.sleep(0.05)
        known = [i for i in ids if _known(c, i)]
        assert len(known) > len(done1)   # some were in flight when the pipe died

        status, results, err = pipe(server.router, server.pub, map(json.dumps, jobs),
                                    "--resume", "--max-in-flight", "4")
        assert status == 0, err
        assert sorted(r["id"] for r in results) == sorted(ids)   # one line per job
        assert "%d re-attached" % len(known) in err
        for r in results:
            check_finished_once(c, by_id[r["id"]], r)
            if r["id"] in done1:
                assert done1[r["id"]] == r
        stats = c.stats()
        assert stats["jobs_accepted"] == N_JOBS and stats["jobs_finished"] == N_JOBS, stats
        assert stats["rejected"]["duplicate"] == len(known), stats
        assert stats["completion_tokens_total"] == sum(j["max_tokens"] for j in jobs), stats


def _known(client, job_id):
    try:
        client.status(job_id)
        return True
    except ConveyorError as e:
        assert e.code == "not_found", e
        return False


@needs_bin
def test_server_killed_and_restarted_while_the_pipe_runs(journaled):
    server = journaled()
    jobs = make_jobs()
    ids = [resume_id(j, n) for n, j in enumerate(jobs, 1)]
    # Requests time out after 3 x 0.3 s: the 2 s without a server put the pipe in its waiting
    # mode (no requests but health probes) until the restart.
    proc = PipeProcess(server, jobs, "--resume", "--max-in-flight", "4",
                       "--request-timeout", "0.3")
    proc.wait_lines(6)
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait()
    lines_at_kill = len(proc.lines)
    time.sleep(2)
    server = journaled()
    status, results, err = proc.finish()
    assert status == 0, (err, server.logs())
    assert lines_at_kill < N_JOBS, "the pipe was done before the kill: make the jobs longer"
    assert "server unreachable" in err and "30/30 done, 0 failed, 0 in flight" in err, err
    assert sorted(r["id"] for r in results) == sorted(ids), results   # one line per job
    by_id = dict(zip(ids, jobs))
    with server.client(request_timeout=5) as c:
        for r in results:
            check_finished_once(c, by_id[r["id"]], r)
