"""AsyncClient: Client's API for asyncio (zmq.asyncio). Coroutines of one event loop may share
one AsyncClient: requests are serialized over its DEALER, and one reader task files the SUB
socket's events for every stream. Use it from one event loop (and thread) only.
"""
import asyncio
import time

import zmq
import zmq.asyncio

from ._core import ClientCore
from .protocol import (DEFAULT_PUB, DEFAULT_ROUTER, ConveyorError, ConveyorTimeout, build_submit,
                       check_reply, pack, raise_for_event)
from .sequencer import TrackedJob


class _Tracked(TrackedJob):
    def __init__(self, job_id, next_seq):
        super().__init__(job_id, next_seq, time.monotonic())
        self.changed = asyncio.Event()


class AsyncClient(ClientCore):
    """See Client; every method is a coroutine, and stream() is an async generator."""

    def __init__(self, router=DEFAULT_ROUTER, pub=DEFAULT_PUB, *, context=None,
                 request_timeout=10.0, retries=2, idle_fetch_s=1.0, first_event_s=0.05,
                 fetch_batch=1024, curve_server_key=None, curve_public_key=None,
                 curve_secret_key=None):
        self._lock = None
        self._reader = None
        super().__init__(context or zmq.asyncio.Context.instance(), _Tracked, router, pub,
                         request_timeout, retries, idle_fetch_s, first_event_s, fetch_batch,
                         curve_server_key, curve_public_key, curve_secret_key)

    async def aclose(self):
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):
                pass
            self._reader = None
        self._close_sockets()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()

    async def _request(self, msg):
        if self._lock is None:
            self._lock = asyncio.Lock()
        data = pack(msg)
        async with self._lock:
            for attempt in range(self._retries + 1):
                try:
                    await asyncio.wait_for(self._dealer.send(data), self._request_timeout)
                    if await self._dealer.poll(int(self._request_timeout * 1000), zmq.POLLIN):
                        return self._decode_reply(await self._dealer.recv(), msg), attempt
                except asyncio.TimeoutError:
                    pass
                self._open_dealer()
        raise self._no_reply(msg)

    async def _call(self, msg):
        return check_reply((await self._request(msg))[0], msg.get("id"))

    async def submit(self, prompt=None, messages=None, prompt_tokens=None, id=None, **params):
        msg = build_submit(id, prompt, messages, prompt_tokens, **params)
        job_id = msg["id"]
        was_tracked = job_id in self._jobs
        self._track(job_id)
        try:
            self._submit_accepted(*(await self._request(msg)), job_id)
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
        tracked = super()._track(job_id, next_seq)
        if self._reader is None:
            self._reader = asyncio.ensure_future(self._read())
        return tracked

    async def _read(self):
        while True:
            tracked = self._dispatch(await self._sub.recv_multipart())
            if tracked is not None:
                tracked.changed.set()

    async def _repair(self, tracked):
        tracked.fetched(time.monotonic())
        try:
            while not tracked.seq.finished:
                reply = await self.fetch(tracked.seq.job_id, tracked.seq.next_seq,
                                         self._fetch_batch)
                if self._filed_fetch(tracked, reply):
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
