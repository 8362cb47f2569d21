"""conveyor-pipe against the fake server: results per job, bounded in-flight jobs, failures and
the exit status."""
import io
import json
import subprocess
import sys

from conveyor_client.pipe import parse_args, run
from fake_server import FakeServer


def pipe(server, lines, *flags):
    args = parse_args(["--router", server.router, "--pub", server.pub, *flags])
    stdout, stderr = io.StringIO(), io.StringIO()
    status = run(args, io.StringIO("".join(l + "\n" for l in lines)), stdout, stderr)
    results = [json.loads(l) for l in stdout.getvalue().splitlines()]
    return status, results, stderr.getvalue()


def test_every_job_gets_one_result_and_in_flight_is_bounded():
    active = []

    def record(msg):  # runs in the server thread at each submit
        active.append(sum(j["state"] in ("queued", "running") for j in server.jobs.values()))

    with FakeServer(reject=record, drop=lambda e: e["kind"] == "accepted") as server:
        jobs = [json.dumps({"id": "p/%d" % i, "prompt": "prompt number %d" % i}) for i in range(30)]
        status, results, err = pipe(server, jobs, "--max-in-flight", "4")
    assert status == 0
    assert sorted(r["id"] for r in results) == sorted("p/%d" % i for i in range(30))
    for r in results:
        assert r["text"] == "prompt number %s" % r["id"].split("/")[1]
        assert r["finish_reason"] == "stop" and set(r["usage"]) and set(r["timing"])
    assert len(active) == 30 and max(active) <= 3   # the 4th is the one being submitted
    assert "30/30 done, 0 failed" in err
    assert all(r.get("stream") is False for r in server.requests if r["op"] == "submit")


def test_refused_and_malformed_jobs_are_reported_and_fail_the_exit_status():
    with FakeServer(reject=lambda m: "too_long" if m["prompt"] == "long" else None) as server:
        lines = [json.dumps({"prompt": "fine"}), "not json", json.dumps({"id": "bad id", "prompt": "x"}),
                 json.dumps({"id": "t", "prompt": "long"}), json.dumps([1, 2]),
                 json.dumps({"prompt": "ok", "bogus_param": 1}), ""]
        status, results, err = pipe(server, lines)
    assert status == 1
    assert len(results) == 6
    ok = [r for r in results if "text" in r]
    assert len(ok) == 1 and ok[0]["text"] == "fine"
    codes = sorted(r["error"]["code"] for r in results if "error" in r)
    assert codes == ["bad_request", "bad_request", "bad_request", "bad_request", "too_long"]
    assert "1/6 done, 5 failed" in err


def test_overloaded_jobs_are_resubmitted():
    refusals = []

    def busy(msg):
        if len(refusals) < 3:
            refusals.append(msg["id"])
            return "overloaded"
        return None

    with FakeServer(reject=busy) as server:
        lines = [json.dumps({"id": "o%d" % i, "prompt": "job %d" % i}) for i in range(5)]
        status, results, _ = pipe(server, lines, "--overload-backoff", "0.05", "--quiet")
    assert status == 0
    assert sorted(r["id"] for r in results) == ["o0", "o1", "o2", "o3", "o4"]
    assert all("text" in r for r in results)


def test_a_job_timeout_is_an_error_result():
    with FakeServer() as server:
        server.paused = True
        status, results, _ = pipe(server, [json.dumps({"id": "slow", "prompt": "x"})],
                                  "--timeout", "0.3", "--quiet")
    assert status == 1
    assert results == [{"id": "slow", "error": {"code": "timeout", "message": "no result within 0.3s"}}]


def test_the_console_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "conveyor_client.pipe", "--help"],
                         capture_output=True, text=True, check=True)
    assert "--max-in-flight" in out.stdout
