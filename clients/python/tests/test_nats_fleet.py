"""A fleet on NATS JetStream: three `conveyor serve --device sim --nats` replicas share one
durable consumer; 300 jobs go in over NATS; one replica is killed (SIGKILL) midway. Every job
must end exactly once in the events stream, with gap-free seqs, no seq stored twice, and the
full output (a resumed job's done event counts what the dead replica produced). Also: NATS down
at start-up (exit 2, the message names the fix), NATS restarted while serving (nothing lost),
a job that does not decode (dead letter + error event), and the Python NatsClient."""
import asyncio
import os
import random
import subprocess
import time

import msgpack
import pytest

from conveyor_client.nats_client import NatsClient, events_subject
from nats_fixture import NatsServer, free_port
from test_e2e import CONVEYOR_BIN, Server

nats = pytest.importorskip("nats", reason="nats-py is installed by setup.sh (requirements.txt)")

FLEET_ARGS = ("--max-num-seqs", "16", "--nats-ack-wait", "2")


@pytest.fixture
def nats_server():
    s = NatsServer()
    try:
        yield s
    finally:
        s.close()


def replica(url, *extra):
    return Server("--nats", url, *FLEET_ARGS, *extra, device="sim")


async def all_events(js, stream="CONVEYOR_EVENTS", subject="conveyor.events.>"):
    """Every message of the events stream, in stream order, as decoded maps."""
    info = await js.stream_info(stream)
    out = []
    if info.state.messages == 0:
        return out
    sub = await js.subscribe(subject, stream=stream, ordered_consumer=True)
    while len(out) < info.state.messages:
        m = await sub.next_msg(timeout=10)
        out.append(msgpack.unpackb(m.data, raw=False))
    await sub.unsubscribe()
    return out


def check_exactly_once(events, expected):
    """expected: job id -> max_tokens. Every job: seqs 0..n-1 once each, one terminal event, the
    last, a done event with every token."""
    by_job = {}
    for ev in events:
        by_job.setdefault(ev["id"], []).append(ev)
    assert set(by_job) == set(expected), "jobs missing from the events stream: %s" % sorted(
        set(expected) - set(by_job))[:10]
    for job_id, evs in by_job.items():
        seqs = [e["seq"] for e in evs]
        assert sorted(seqs) == list(range(len(seqs))), "%s: seqs %s" % (job_id, seqs)
        terminal = [e for e in evs if e["kind"] in ("done", "error")]
        assert len(terminal) == 1, "%s: %d terminal events" % (job_id, len(terminal))
        last = max(evs, key=lambda e: e["seq"])
        assert last["kind"] == "done", "%s ended with %s" % (job_id, last)
        assert last["usage"]["completion_tokens"] == expected[job_id], (job_id, last["usage"])
        tokens = sum(len(e.get("token_ids", [])) for e in evs if e["kind"] == "tokens")
        assert tokens == expected[job_id], "%s: %d tokens in its events" % (job_id, tokens)


def test_300_jobs_three_replicas_one_killed_nothing_lost_nothing_repeated(nats_server):
    reps = [replica(nats_server.url) for _ in range(3)]
    try:
        async def run():
            nc = await nats.connect(nats_server.url)
            js = nc.jetstream()
            rng = random.Random(7)
            expected = {}
            client = NatsClient(nc)
            sub = await nc.subscribe("conveyor.events.>")  # before the jobs: the first end at once
            for i in range(300):
                n = rng.randint(20, 120)
                job_id = await client.submit("hello", id="fleet/%d" % i, max_tokens=n)
                expected[job_id] = n
            # Kill one replica while it holds jobs, once it has finished some (its own count: the
            # replicas run ahead of this subscriber, which decodes every tokens event).
            done = set()
            deadline = time.monotonic() + 120
            killed = False
            received = 0
            while len(done) < len(expected) and time.monotonic() < deadline:
                try:
                    m = await sub.next_msg(timeout=1)
                except Exception:
                    continue
                received += 1
                ev = msgpack.unpackb(m.data, raw=False)
                if ev["kind"] in ("done", "error"):
                    done.add(ev["id"])
                if not killed and received % 20 == 0:
                    with reps[0].client(request_timeout=5.0, retries=0) as zc:
                        st = zc.stats()
                    if st["jobs_finished"] >= 20 and st["running"] + st["queued"] > 0:
                        reps[0].proc.kill()
                        killed = True
                        held_by_killed = st["running"] + st["queued"]
            if len(done) != len(expected):
                missing = sorted(set(expected) - done)
                evs = [e for e in await all_events(js) if e["id"] in missing[:3]]
                ci = await js.consumer_info("CONVEYOR_JOBS", "conveyor")
                pytest.fail("%d of %d jobs ended; missing %s; their stored events %s; consumer %s; logs:\n%s"
                            % (len(done), len(expected), missing[:10], evs, ci,
                               "\n".join(r.logs() for r in reps)))
            assert killed
            await asyncio.sleep(0.5)  # the last acks
            events = await all_events(js)
            check_exactly_once(events, expected)
            assert held_by_killed > 0, "the killed replica held no job: nothing was failed over"
            ci = await js.consumer_info("CONVEYOR_JOBS", "conveyor")
            assert ci.num_ack_pending == 0 and ci.num_pending == 0, ci
            jobs = await js.stream_info("CONVEYOR_JOBS")
            assert jobs.state.messages == 0, "work queue not empty: %s" % jobs.state
            # A late subscriber replays a job through the client (same events, once each).
            replayed = [ev async for ev in client.stream("fleet/5", timeout=10)]
            assert [e["seq"] for e in replayed] == list(range(len(replayed)))
            assert replayed[-1]["kind"] == "done"
            await nc.close()
        asyncio.run(run())
        for r in reps[1:]:
            assert r.stop(timeout=30) == 0, r.logs()
    finally:
        for r in reps:
            r.kill()


def test_nats_down_at_start_up_exits_2_naming_the_fix():
    port = free_port()
    p = subprocess.run([CONVEYOR_BIN, "serve", "--device", "null", "--nats", "nats://127.0.0.1:%d" % port,
                        "--nats-connect-timeout", "1", "--router", "tcp://127.0.0.1:*", "--pub",
                        "tcp://127.0.0.1:*", "--pull", "tcp://127.0.0.1:*"],
                       capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode == 2, out
    assert "cannot reach NATS at nats://127.0.0.1:%d" % port in out and "nats-server -js" in out, out


def test_a_nats_server_without_jetstream_is_refused(tmp_path):
    port = free_port()
    proc = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        p = subprocess.run([CONVEYOR_BIN, "serve", "--device", "null", "--nats", "nats://127.0.0.1:%d" % port,
                            "--router", "tcp://127.0.0.1:*", "--pub", "tcp://127.0.0.1:*", "--pull",
                            "tcp://127.0.0.1:*"], capture_output=True, text=True, timeout=60)
        out = p.stdout + p.stderr
        assert p.returncode == 2 and "no JetStream" in out and "-js" in out, out
    finally:
        proc.terminate()
        proc.wait(10)


def test_bad_nats_settings_are_refused_at_start_up():
    for args, words in ((["--nats", "http://x:4222"], "not a NATS URL"),
                        (["--nats", "nats://127.0.0.1:1", "--nats-subject", "a.*"], "not valid"),
                        (["--nats", "nats://127.0.0.1:1", "--nats-max-deliver", "1"], "nats-max-deliver")):
        p = subprocess.run([CONVEYOR_BIN, "serve", "--device", "null", *args], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 2 and words in p.stdout + p.stderr, (args, p.stdout + p.stderr)


def test_nats_restarted_while_serving_loses_nothing(nats_server):
    r = replica(nats_server.url)
    try:
        async def submit(ids):
            nc = await nats.connect(nats_server.url)
            c = NatsClient(nc)
            for i in ids:
                await c.submit("hello", id="restart-%d" % i, max_tokens=200)
            await nc.close()
        asyncio.run(submit(range(40)))
        time.sleep(0.5)  # running now
        nats_server.stop()
        time.sleep(1.0)
        nats_server.start()  # same port, same store
        asyncio.run(submit(range(40, 60)))

        async def check():
            nc = await nats.connect(nats_server.url)
            js = nc.jetstream()
            c = NatsClient(nc)
            for i in range(60):
                await c.wait("restart-%d" % i, timeout=60)
            events = await all_events(js)
            check_exactly_once(events, {"restart-%d" % i: 200 for i in range(60)})
            await nc.close()
        asyncio.run(check())
        assert r.stop(timeout=30) == 0, r.logs()
        assert any("reconnected" in line for line in r.log), r.logs()
    finally:
        r.kill()


def test_a_job_that_does_not_decode_is_dead_lettered_with_an_error_event(nats_server):
    r = replica(nats_server.url)
    try:
        async def run():
            nc = await nats.connect(nats_server.url)
            js = nc.jetstream()
            await js.publish("conveyor.jobs", msgpack.packb({"op": "submit", "id": "bad.one/x", "max_tokens": 3}),
                             headers={"Nats-Msg-Id": "bad.one/x"})
            c = NatsClient(nc)
            evs = [ev async for ev in c.stream("bad.one/x", timeout=20)]
            assert len(evs) == 1 and evs[0]["kind"] == "error" and evs[0]["code"] == "bad_request", evs
            sub = await js.subscribe("conveyor.dead", stream="CONVEYOR_DEAD", ordered_consumer=True)
            m = await sub.next_msg(timeout=10)
            dead = msgpack.unpackb(m.data, raw=False)
            assert dead["id"] == "bad.one/x" and dead["error"]["code"] == "bad_request", dead
            assert msgpack.unpackb(dead["request"], raw=False)["id"] == "bad.one/x"
            # The events subject encodes '.' inside an id part and keeps '/' as the token break.
            assert events_subject("bad.one/x") == "conveyor.events.bad%2Eone.x"
            # A good job still runs (and the generate path works).
            text = await c.generate("hello", id="good-1", max_tokens=4, timeout=20)
            assert isinstance(text, str)
            await nc.close()
        asyncio.run(run())
    finally:
        r.kill()


def test_a_drained_replica_hands_its_running_jobs_to_another(nats_server):
    """SIGTERM with a short drain: the jobs still running are not stored as cancelled but handed
    back, and the other replica finishes them (every token, each seq once)."""
    first = replica(nats_server.url, "--drain-timeout", "0.3")
    try:
        async def submit():
            nc = await nats.connect(nats_server.url)
            c = NatsClient(nc)
            for i in range(8):
                await c.submit("hello", id="drain-%d" % i, max_tokens=600)
            await nc.close()
        asyncio.run(submit())
        time.sleep(1.0)  # the first replica runs all eight
        second = replica(nats_server.url)
        try:
            assert first.stop(timeout=30) == 0, first.logs()

            async def check():
                nc = await nats.connect(nats_server.url)
                c = NatsClient(nc)
                for i in range(8):
                    done = await c.wait("drain-%d" % i, timeout=60)
                    assert done["finish_reason"] == "length", done
                check_exactly_once(await all_events(nc.jetstream()), {"drain-%d" % i: 600 for i in range(8)})
                await nc.close()
            asyncio.run(check())
        finally:
            second.kill()
    finally:
        first.kill()
