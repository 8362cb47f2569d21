"""Client and AsyncClient over real ZeroMQ sockets against tests/fake_server.py (a stand-in for
`conveyor serve`; end-to-end tests against the real server live elsewhere)."""
import asyncio

import pytest

from conveyor_client import AsyncClient, Client, ConveyorError, ConveyorTimeout
from fake_server import FakeServer

PROMPT = "The quick brown fox jumps over the lazy dog."


@pytest.fixture
def client(server):
    with Client(server.router, server.pub, request_timeout=2.0, idle_fetch_s=0.1) as c:
        yield c


def check_stream(events, job_id, text):
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert all(e["id"] == job_id for e in events)
    assert events[0]["kind"] == "accepted"
    assert events[-1]["kind"] == "done"
    assert [e["kind"] for e in events[1:-1]] == ["tokens"] * (len(events) - 2)
    assert "".join(e["text"] for e in events[1:-1]) == events[-1]["text"] == text


def test_health_and_stats(client):
    assert client.health() == {"ok": True, "status": "serving", "protocol": 1, "model": "fake"}
    assert client.stats()["ok"] is True


def test_generate_returns_the_final_text_without_streaming_tokens(client, server):
    assert client.generate(PROMPT, id="g-1", max_tokens=100) == PROMPT
    submit = next(r for r in server.requests if r["op"] == "submit")
    assert submit == {"op": "submit", "id": "g-1", "prompt": PROMPT, "max_tokens": 100,
                      "stream": False}


def test_stream_yields_every_event_in_order(client):
    job_id = client.submit(PROMPT)
    events = list(client.stream(job_id, timeout=10))
    check_stream(events, job_id, PROMPT)


def test_dropped_events_are_repaired():
    with FakeServer(drop=lambda e: e["seq"] % 3 == 1 or e["kind"] == "done") as server, \
            Client(server.router, server.pub, idle_fetch_s=0.1) as c:
        job_id = c.submit(PROMPT, id="batch-1/job-7")
        check_stream(list(c.stream(job_id, timeout=10)), job_id, PROMPT)
        assert any(r["op"] == "fetch" for r in server.requests)


def test_events_published_before_the_subscription_landed_are_fetched_early():
    with FakeServer(drop=lambda e: e["kind"] in ("accepted", "done")) as server, \
            Client(server.router, server.pub, idle_fetch_s=30.0) as c:
        assert c.generate(PROMPT, timeout=15) == PROMPT  # well under idle_fetch_s: fetched early, not after 30 s


def test_a_second_client_joins_late_through_fetch(client, server):
    job_id = client.submit(PROMPT)
    client.wait(job_id, timeout=10)
    with Client(server.router, server.pub, idle_fetch_s=0.1) as other:
        check_stream(list(other.stream(job_id, timeout=10)), job_id, PROMPT)


def test_max_tokens_ends_with_length(client):
    job_id = client.submit(PROMPT, max_tokens=2)
    done = client.wait(job_id, timeout=10)
    assert done["finish_reason"] == "length" and done["text"] == PROMPT[:6]


def test_rejections_raise_with_the_code(server, client):
    server.reject = lambda msg: "overloaded"
    with pytest.raises(ConveyorError) as err:
        client.submit(PROMPT, id="r-1")
    assert err.value.code == "overloaded" and err.value.id == "r-1"
    assert "r-1" not in client._jobs


def test_a_duplicate_id_is_refused(client):
    client.submit(PROMPT, id="d-1")
    with pytest.raises(ConveyorError) as err:
        client.submit(PROMPT, id="d-1")
    assert err.value.code == "duplicate"


def test_a_lost_reply_is_resent_and_duplicate_counts_as_accepted():
    with FakeServer(lose_replies=1) as server, \
            Client(server.router, server.pub, request_timeout=0.3, idle_fetch_s=0.1) as c:
        assert c.submit(PROMPT, id="lost-1") == "lost-1"
        assert [r["op"] for r in server.requests[:2]] == ["submit", "submit"]
        assert c.wait("lost-1", timeout=10)["text"] == PROMPT


def test_no_server_times_out():
    with Client("tcp://127.0.0.1:9", "tcp://127.0.0.1:9", request_timeout=0.1, retries=1) as c:
        with pytest.raises(ConveyorTimeout):
            c.health()


def test_local_argument_errors():
    with Client("tcp://127.0.0.1:9", "tcp://127.0.0.1:9") as c:
        with pytest.raises(ValueError):
            c.submit("x", id="bad id")
        with pytest.raises(ValueError):
            c.submit()
        with pytest.raises(ValueError):
            c.submit("x", prompt_tokens=[1])
        with pytest.raises(TypeError):
            c.submit("x", max_token=5)


def test_cancel_status_and_not_found(client, server):
    server.paused = True
    job_id = client.submit(PROMPT)
    assert client.status(job_id)["state"] == "queued"
    assert client.cancel(job_id) == "cancelled"
    done = client.wait(job_id, timeout=10)
    assert done["finish_reason"] == "cancelled"
    with pytest.raises(ConveyorError) as err:
        client.status("never-submitted")
    assert err.value.code == "not_found"


def test_stream_timeout_then_resume(client, server):
    server.paused = True
    job_id = client.submit(PROMPT)
    with pytest.raises(ConveyorTimeout):
        list(client.stream(job_id, timeout=0.3))
    server.paused = False
    assert client.wait(job_id, timeout=10)["text"] == PROMPT


def test_an_error_event_raises_from_wait(client):
    job_id = client.submit(PROMPT)
    events = list(client.stream(job_id, timeout=10))
    assert events[-1]["kind"] == "done"
    failing = {"id": "e", "seq": 0, "kind": "error", "code": "internal", "message": "boom"}
    client._track("e").seq.add(failing)
    with pytest.raises(ConveyorError) as err:
        client.wait("e", timeout=1)
    assert err.value.code == "internal"


# --- AsyncClient -----------------------------------------------------------------------------
def run(coro):
    return asyncio.run(coro)


def test_async_generate_stream_and_errors():
    async def main():
        with FakeServer(drop=lambda e: e["seq"] in (2, 5)) as server:
            async with AsyncClient(server.router, server.pub, request_timeout=2.0,
                                   idle_fetch_s=0.1) as c:
                assert (await c.health())["protocol"] == 1
                texts = await asyncio.gather(*(c.generate("job %d says hi" % i) for i in range(8)))
                assert texts == ["job %d says hi" % i for i in range(8)]
                job_id = await c.submit(PROMPT)
                events = [e async for e in c.stream(job_id, timeout=10)]
                check_stream(events, job_id, PROMPT)
                with pytest.raises(ConveyorError) as err:
                    await c.submit(PROMPT, id=job_id)
                assert err.value.code == "duplicate"
                with pytest.raises(ConveyorError):
                    await c.fetch("nope")
                server.paused = True
                job_id = await c.submit(PROMPT)
                with pytest.raises(ConveyorTimeout):
                    await c.wait(job_id, timeout=0.3)
                assert await c.cancel(job_id) == "cancelled"
                assert (await c.wait(job_id, timeout=5))["finish_reason"] == "cancelled"
    run(main())


def test_async_lost_reply_is_resent():
    async def main():
        with FakeServer(lose_replies=1) as server:
            async with AsyncClient(server.router, server.pub, request_timeout=0.3,
                                   idle_fetch_s=0.1) as c:
                assert await c.generate(PROMPT, id="al-1") == PROMPT
    run(main())
