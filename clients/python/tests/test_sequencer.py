"""Gap repair without a server: JobSequencer alone, and Client.stream()/poll() driven by a
scripted SUB feed and a fake fetch over a known history."""
import random

import msgpack
import pytest

from conveyor_client import Client, ConveyorError, ConveyorTimeout, JobSequencer


def history(job_id, n_tokens, terminal="done"):
    evs = [{"id": job_id, "seq": 0, "kind": "accepted"}]
    for i in range(n_tokens):
        evs.append({"id": job_id, "seq": i + 1, "kind": "tokens", "token_ids": [i], "text": "t%d " % i})
    last = {"id": job_id, "seq": n_tokens + 1, "kind": terminal}
    last.update({"finish_reason": "stop", "text": "".join(e["text"] for e in evs[1:])}
                if terminal == "done" else {"code": "internal", "message": "boom"})
    return evs + [last]


# --- JobSequencer ------------------------------------------------------------------------------
def test_in_order_events_are_released_at_once():
    s = JobSequencer("a")
    for ev in history("a", 3):
        assert s.add(ev)
        assert s.take() == [ev]
        assert not s.has_gap
    assert s.finished


def test_a_hole_holds_back_later_events_until_filled():
    h = history("a", 4)
    s = JobSequencer("a")
    s.add(h[0])
    s.add(h[2])
    s.add(h[3])
    assert s.take() == [h[0]]
    assert s.has_gap and s.next_seq == 1
    assert s.add_all(h[1:4]) == 1   # 2 and 3 are already buffered
    assert s.take() == h[1:4]
    assert not s.has_gap


def test_duplicates_other_jobs_and_junk_are_ignored():
    h = history("a", 2)
    s = JobSequencer("a")
    assert s.add(h[0]) and not s.add(h[0])
    assert not s.add(dict(h[1], id="a/b"))        # prefix topic "job/a/" also carries job a/b
    assert not s.add(dict(h[1], seq=True))
    assert not s.add(dict(h[1], seq="1"))
    assert not s.add({"seq": 1})
    assert not s.add("garbage")
    assert s.take() == [h[0]]


def test_nothing_follows_the_terminal_event():
    h = history("a", 1)
    s = JobSequencer("a")
    s.add_all(h)
    assert s.finished and s.take() == h
    assert not s.add({"id": "a", "seq": len(h), "kind": "tokens"})
    assert s.take() == []


def test_an_error_event_is_terminal():
    s = JobSequencer("a")
    s.add_all(history("a", 2, terminal="error"))
    assert s.finished and s.take()[-1]["kind"] == "error"


def test_a_sequencer_can_start_mid_stream():
    h = history("a", 5)
    s = JobSequencer("a", next_seq=3)
    assert not s.add(h[2])
    s.add_all(h[3:])
    assert s.take() == h[3:]


# --- Client.stream() over a scripted feed --------------------------------------------------
class ScriptedClient(Client):
    """A Client whose SUB feed is `live` (a list of events delivered a few per pump) and whose
    fetch serves `histories`; no server is involved."""

    def __init__(self, histories, live, per_pump=3, **kw):
        kw.setdefault("idle_fetch_s", 0.05)
        super().__init__("tcp://127.0.0.1:9", "tcp://127.0.0.1:9", **kw)
        self.histories, self.live, self.per_pump = histories, list(live), per_pump
        self.fetches = []

    def fetch(self, job_id, from_seq=0, max_events=1024):
        self.fetches.append((job_id, from_seq))
        if job_id not in self.histories:
            raise ConveyorError("not_found", "no job %s" % job_id, id=job_id)
        events = self.histories[job_id][from_seq:from_seq + max_events]
        return {"ok": True, "id": job_id, "events": events,
                "complete": bool(events) and events[-1]["kind"] in ("done", "error")}

    def _pump(self, timeout_s):
        batch, self.live = self.live[:self.per_pump], self.live[self.per_pump:]
        for ev in batch:
            self._dispatch([("job/%s/" % ev["id"]).encode(), msgpack.packb(ev)])


def streamed(client, job_id, **kw):
    return list(client.stream(job_id, **kw))


@pytest.fixture
def make():
    made = []

    def factory(*a, **kw):
        c = ScriptedClient(*a, **kw)
        made.append(c)
        return c
    yield factory
    for c in made:
        c.close()


def test_no_loss_needs_no_fetch(make):
    h = history("a", 10)
    c = make({"a": h}, h)
    c._track("a")                     # as submit() does before sending
    assert streamed(c, "a") == h
    assert c.fetches == []
    assert "a" not in c._jobs         # forgotten after the terminal event


def test_dropped_events_are_fetched_from_the_first_hole(make):
    h = history("a", 10)
    live = [e for e in h if e["seq"] not in (3, 4, 8)]
    c = make({"a": h}, live)
    c._track("a")
    assert streamed(c, "a") == h
    assert c.fetches and c.fetches[0] == ("a", 3)


def test_a_lost_terminal_event_is_fetched_when_the_stream_goes_idle(make):
    h = history("a", 4)
    c = make({"a": h}, h[:-1])
    c._track("a")
    assert streamed(c, "a", timeout=5) == h
    assert c.fetches == [("a", len(h) - 1)]


def test_a_late_join_fetches_history_first(make):
    h = history("a", 12)
    c = make({"a": h}, h[7:])         # the subscription started while seq 7 was published
    assert streamed(c, "a") == h
    assert c.fetches[0] == ("a", 0)


def test_long_histories_are_fetched_in_batches(make):
    h = history("a", 20)
    c = make({"a": h}, [], fetch_batch=4)
    assert streamed(c, "a") == h
    assert [f for _, f in c.fetches] == [0, 4, 8, 12, 16, 20]


def test_duplicated_and_reordered_live_events_are_delivered_once_in_order(make):
    h = history("a", 15)
    live = h[:] + h[2:9]
    random.Random(7).shuffle(live)
    c = make({"a": h}, live, per_pump=1)
    c._track("a")
    assert streamed(c, "a") == h


@pytest.mark.parametrize("seed", range(20))
def test_random_loss_and_reordering_always_repair_to_the_full_history(make, seed):
    rng = random.Random(seed)
    h = history("a", rng.randint(0, 40))
    live = [e for e in h if rng.random() > 0.3]
    rng.shuffle(live)
    c = make({"a": h}, live, per_pump=rng.randint(1, 5), fetch_batch=rng.randint(1, 8))
    if rng.random() < 0.5:
        c._track("a")
    assert streamed(c, "a", timeout=10) == h


def test_the_stream_can_resume_from_a_given_seq(make):
    h = history("a", 6)
    c = make({"a": h}, [])
    assert streamed(c, "a", from_seq=4) == h[4:]


def test_a_forgotten_job_raises_not_found(make):
    c = make({}, [])
    with pytest.raises(ConveyorError) as err:
        streamed(c, "gone")
    assert err.value.code == "not_found"


def test_no_terminal_event_times_out(make):
    h = history("a", 3)
    c = make({"a": h[:2]}, h[:2])
    c._track("a")
    with pytest.raises(ConveyorTimeout):
        streamed(c, "a", timeout=0.3)


def test_poll_interleaves_jobs_and_keeps_each_in_order(make):
    ha, hb = history("a", 6), history("b", 4, terminal="error")
    live = [e for pair in zip(ha, hb) for e in pair] + ha[len(hb):]
    live = [e for e in live if not (e["id"] == "a" and e["seq"] == 2)]
    c = make({"a": ha, "b": hb}, live, per_pump=2)
    c._track("a")
    c._track("b")
    got = {"a": [], "b": []}
    for _ in range(200):
        for job_id, ev in c.poll(timeout=0.2):
            got[job_id].append(ev)
        if not c._jobs:
            break
    assert got == {"a": ha, "b": hb}


def test_poll_reports_a_forgotten_job_as_an_error_event(make):
    c = make({}, [])
    c._track("x")
    c._jobs["x"].last_progress -= 1   # idle: the next poll fetches
    out = c.poll(timeout=0.5)
    assert out == [("x", {"id": "x", "seq": None, "kind": "error", "code": "not_found",
                          "message": "no job x"})]


def test_a_job_with_no_event_yet_is_fetched_early_once(make):
    # The subscription lost the race with the submit: every event was published before it
    # landed. The early check finds them long before the (here 30 s) idle fetch would.
    h = history("a", 3)
    c = make({"a": h}, [], idle_fetch_s=30.0, first_event_s=0.05)
    c._track("a")
    assert streamed(c, "a", timeout=5) == h
    assert c.fetches == [("a", 0)]


def test_fetch_due_rules():
    from conveyor_client.sequencer import TrackedJob
    t = TrackedJob("a", 0, now=100.0)
    assert t.fetch_due(100.0, idle_fetch_s=1.0, first_event_s=0.05) == pytest.approx(0.05)
    t.fetched(100.1)                                  # the early check ran: idle rule from now on
    assert t.fetch_due(100.2, 1.0, 0.05) == pytest.approx(0.9)
    t.seq.add({"id": "a", "seq": 2, "kind": "tokens"})
    assert t.fetch_due(100.2, 1.0, 0.05) == 0.0       # a hole: fetch at once
