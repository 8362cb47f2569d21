"""AsyncClient: Client's API for asyncio (zmq.asyncio). Coroutines of one event loop may share
one AsyncClient: requests are serialized over its DEALER, and one reader task files the SUB
socket's events for every stream. Use it from one event loop (and thread) only.
"""
import asyncio
import time

import zmq
import zmq.asyncio

from .protocol import (DEFAULT_PUB, DEFAULT_ROUTER, ConveyorError, ConveyorTimeout, build_submit,
                       check_reply, pack, raise_for_event, topic_for, unpack)
from .curve import apply_curve, check_curve
from .sequencer import TrackedJob


class _Tracked(TrackedJob):
    def __init__(self, job_id, next_seq):
        super().__init__(job_id, next_seq, time.monotonic())
        self.changed = asyncio.Event()


class AsyncClient:
    """See Client; every method is a coroutine, and stream() is an async generator."""

    def __init__(self, router=DEFAULT_ROUTER, pub=DEFAULT_PUB, *, context=None,
                 request_timeout=10.0, retries=2, idle_fetch_s=1.0, first_event_s=0.05,
                 fetch_batch=1024, curve_server_key=None, curve_public_key=None,
                 curve_secret_key=None):
        self._curve = check_curve(curve_server_key, curve_public_key, curve_secret_key)
        self._ctx = context or zmq.asyncio.Context.instance()
        self._router = router
        self._request_timeout = request_timeout
        self._retries = retries
        self._idle_fetch_s = idle_fetch_s
        self._first_event_s = first_event_s
        self._fetch_batch = fetch_batch
        self._jobs = {}
        self._lock = None
        self._reader = None
        self.last_heartbeat = None
        self._dealer = None
        self._open_dealer()
        self._sub = self._ctx.socket(zmq.SUB)
        self._sub.setsockopt(zmq.LINGER, 0)
        self._sub.setsockopt(zmq.RCVHWM, 100000)
        apply_curve(self._sub, self._curve)
        self._sub.connect(pub)

    async def aclose(self):
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):
                pass
            self._reader = None
        for sock in (self._dealer, self._sub):
            if sock is not None:
                sock.close(0)
        self._dealer = self._sub = None

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()

    def _open_dealer(self):
        if self._dealer is not None:
            self._dealer.close(0)
        self._dealer = self._ctx.socket(zmq.DEALER)
        self._dealer.setsockopt(zmq.LINGER, 0)
        apply_curve(self._dealer, self._curve)
        self._dealer.connect(self._router)

    async def _request(self, msg):
        if self._lock is None:
            self._lock = asyncio.Lock()
        data = pack(msg)
        async with self._lock:
            for attempt in range(self._retries + 1):
                try:
                    await asyncio.wait_for(self._dealer.send(data), self._request_timeout)
                    if await self._dealer.poll(int(self._request_timeout * 1000), zmq.POLLIN):
                        return unpack(await self._dealer.recv()), attempt
                except asyncio.TimeoutError:
                    pass
                except ValueError as e:
                    raise ConveyorError("internal", "undecodable reply: %s" % e, id=msg.get("id"))
                self._open_dealer()
        raise ConveyorTimeout("no reply from %s to %s after %d attempts"
                              % (self._router, msg.get("op"), self._retries + 1), msg.get("id"))

    async def _call(self, msg):
        return check_reply((await self._request(msg))[0], msg.get("id"))

    async def submit(self, prompt=None, messages=None, prompt_tokens=None, id=None, **params):
        msg = build_submit(id, prompt, messages, prompt_tokens, **params)
        job_id = msg["id"]
        was_tracked = job_id in self._jobs
        self._track(job_id)
        try:
            reply, attempt = await self._request(msg)
            if attempt > 0 and not reply.get("ok") and \
                    (reply.get("error") or {}).get("code") == "duplicate":
                return job_id
            check_reply(reply, job_id)
        except BaseException:
            if not was_tracked:
                self.forget(job_id)
            raise
        return job_id

    async def cancel(self, job_id):
        return (await self._call({"op": "cancel", "id": job_id}))["state"]

    async def status(self, job_id):
        return await self._call({"op": "status", "id": job_id})

    async def fetch(self, job_id, from_seq=0, max_events=1024):
        return await self._call({"op": "fetch", "id": job_id, "from_seq": from_seq,
                                 "max_events": max_events})

    async def stats(self):
        return await self._call({"op": "stats"})

    async def health(self):
        return await self._call({"op": "health"})

    # --- events ----------------------------------------------------------------------------
    def _track(self, job_id, next_seq=0):
        tracked = self._jobs.get(job_id)
        if tracked is None:
            tracked = self._jobs[job_id] = _Tracked(job_id, next_seq)
            self._sub.setsockopt_string(zmq.SUBSCRIBE, topic_for(job_id))
        if self._reader is None:
            self._reader = asyncio.ensure_future(self._read())
        return tracked

    def forget(self, job_id):
        if self._jobs.pop(job_id, None) is not None and self._sub is not None:
            self._sub.setsockopt_string(zmq.UNSUBSCRIBE, topic_for(job_id))

    def subscribe_heartbeat(self):
        self._sub.setsockopt_string(zmq.SUBSCRIBE, "sys/")

    async def _read(self):
        while True:
            frames = await self._sub.recv_multipart()
            if len(frames) != 2:
                continue
            try:
                event = unpack(frames[1])
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            if frames[0] == b"sys/":
                self.last_heartbeat = event
                continue
            tracked = self._jobs.get(event.get("id"))
            if tracked is not None and tracked.seq.add(event):
                tracked.last_progress = time.monotonic()
                tracked.changed.set()

    async def _repair(self, tracked):
        tracked.fetched(time.monotonic())
        try:
            while not tracked.seq.finished:
                reply = await self.fetch(tracked.seq.job_id, tracked.seq.next_seq,
                                         self._fetch_batch)
                events = reply.get("events") or []
                new = tracked.seq.add_all(events)
                if reply.get("complete") or len(events) < self._fetch_batch or new == 0:
                    break
        except ConveyorError as e:
            tracked.error = e

    async def stream(self, job_id, timeout=None, from_seq=0):
        """Async generator with Client.stream()'s contract."""
        tracked = self._jobs.get(job_id)
        if tracked is None:
            tracked = self._track(job_id, from_seq)
            await self._repair(tracked)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            events = tracked.seq.take()
            if tracked.seq.finished:
                self.forget(job_id)
            for event in events:
                yield event
            if tracked.seq.finished:
                return
            if tracked.error is not None:
                self.forget(job_id)
                raise tracked.error
            wait = tracked.fetch_due(time.monotonic(), self._idle_fetch_s, self._first_event_s)
            if wait <= 0:
                await self._repair(tracked)
                continue
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise ConveyorTimeout("job %s: no terminal event within %ss"
                                          % (job_id, timeout), job_id)
            tracked.changed.clear()
            try:
                await asyncio.wait_for(tracked.changed.wait(), wait)
            except asyncio.TimeoutError:
                pass

    async def wait(self, job_id, timeout=None):
        last = None
        async for last in self.stream(job_id, timeout):
            pass
        return raise_for_event(last)

    async def generate(self, prompt=None, messages=None, prompt_tokens=None, id=None,
                       timeout=None, **params):
        params.setdefault("stream", False)
        job_id = await self.submit(prompt, messages, prompt_tokens, id, **params)
        return (await self.wait(job_id, timeout))["text"]
