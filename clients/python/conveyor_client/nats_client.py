"""Submit jobs to a conveyor fleet over NATS JetStream and stream their events (asyncio, nats-py).

    from conveyor_client.nats_client import NatsClient
    async with await NatsClient.connect("nats://127.0.0.1:4222") as c:
        job = await c.submit("Write a haiku about queues.", max_tokens=64)
        async for ev in c.stream(job):
            ...

A job is the protocol's submit map, published on the jobs subject with the job id as JetStream
message id (a repeated publish within the duplicate window is dropped). Its events are the same
maps with the same seq numbers as over ZeroMQ, stored on "<events prefix>.<id tokens>": a late
subscriber replays them from the stream. A replica that dies mid-job is replaced by another that
continues at the next seq; stream() yields each seq once, in order, ending with done or error.
"""
import asyncio
import time

import msgpack

from .protocol import ConveyorError, ConveyorTimeout, build_submit, raise_for_event

DEFAULT_NATS = "nats://127.0.0.1:4222"
JOBS_SUBJECT = "conveyor.jobs"
EVENTS_STREAM = "CONVEYOR_EVENTS"
EVENTS_PREFIX = "conveyor.events"


def events_subject(job_id, prefix=EVENTS_PREFIX):
    """The subject of a job's events: its '/'-separated parts become tokens (so
    "<prefix>.batch-7.>" is every job of "batch-7/"), '.' inside a part is written %2E and an
    empty part is %."""
    parts = [p.replace(".", "%2E") if p else "%" for p in job_id.split("/")]
    return prefix + "." + ".".join(parts)


class NatsClient:
    """One connection to NATS; submit() and stream() may run concurrently for many jobs."""

    def __init__(self, nc, *, jobs_subject=JOBS_SUBJECT, events_stream=EVENTS_STREAM,
                 events_prefix=EVENTS_PREFIX):
        self._nc = nc
        self._js = nc.jetstream()
        self._jobs_subject = jobs_subject
        self._events_stream = events_stream
        self._events_prefix = events_prefix

    @classmethod
    async def connect(cls, url=DEFAULT_NATS, **kwargs):
        """Connects (nats-py; options such as user_credentials= pass through) and returns a client."""
        import nats  # nats-py: only needed for this client
        names = ("jobs_subject", "events_stream", "events_prefix")
        own = {k: kwargs.pop(k) for k in names if k in kwargs}
        return cls(await nats.connect(url, **kwargs), **own)

    async def close(self):
        await self._nc.drain()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def submit(self, prompt=None, messages=None, prompt_tokens=None, id=None, **params):
        """Publishes one job and returns its id (a new uuid4 when id is None) once JetStream has
        stored it. Publishing the same id again within the duplicate window is harmless."""
        msg = build_submit(id, prompt, messages, prompt_tokens, **params)
        await self._js.publish(self._jobs_subject, msgpack.packb(msg, use_bin_type=True),
                               headers={"Nats-Msg-Id": msg["id"]})
        return msg["id"]

    async def stream(self, job_id, timeout=None, from_seq=0):
        """Yields the job's events in seq order, each once, from from_seq, ending with its
        terminal event (an error event is yielded, not raised). Raises ConveyorTimeout when
        timeout seconds pass without the terminal event."""
        sub = await self._js.subscribe(events_subject(job_id, self._events_prefix),
                                       stream=self._events_stream, ordered_consumer=True)
        deadline = None if timeout is None else time.monotonic() + timeout
        want, early = from_seq, {}
        try:
            while True:
                wait = 5.0 if deadline is None else deadline - time.monotonic()
                if wait <= 0:
                    raise ConveyorTimeout("job %s: no terminal event within %ss" % (job_id, timeout),
                                          job_id)
                try:
                    m = await sub.next_msg(timeout=min(wait, 5.0))
                except asyncio.TimeoutError:
                    continue
                except Exception as e:  # nats.errors.TimeoutError is not asyncio's everywhere
                    if type(e).__name__ == "TimeoutError":
                        continue
                    raise
                ev = msgpack.unpackb(m.data, raw=False)
                if ev.get("id") != job_id or ev.get("seq", -1) < want:
                    continue  # another job on this subject, or a seq already yielded
                early[ev["seq"]] = ev
                while want in early:
                    ev = early.pop(want)
                    want += 1
                    yield ev
                    if ev.get("kind") in ("done", "error"):
                        return
        finally:
            await sub.unsubscribe()

    async def wait(self, job_id, timeout=None):
        """The job's done event; raises ConveyorError if it ended with an error event."""
        last = None
        async for last in self.stream(job_id, timeout):
            pass
        return raise_for_event(last)

    async def generate(self, prompt=None, messages=None, prompt_tokens=None, id=None, timeout=None,
                       **params):
        """Submits a job and returns its full output text."""
        params.setdefault("stream", False)
        job_id = await self.submit(prompt, messages, prompt_tokens, id, **params)
        return (await self.wait(job_id, timeout))["text"]


__all__ = ["NatsClient", "events_subject", "ConveyorError", "DEFAULT_NATS", "JOBS_SUBJECT",
           "EVENTS_STREAM", "EVENTS_PREFIX"]
