"""Client: the synchronous conveyor client (one DEALER to the ROUTER, one SUB to the PUB).

Thread-safety: ZeroMQ sockets are not thread-safe, so a Client must only be used by the thread
that uses it first; give every thread its own Client (they may share one zmq.Context).
"""
import time

import zmq

from ._core import ClientCore
from .protocol import (DEFAULT_PUB, DEFAULT_ROUTER, ConveyorError, ConveyorTimeout, build_submit,
                       check_reply, new_id, pack, raise_for_event, valid_id)
from .sequencer import TrackedJob


class _Tracked(TrackedJob):
    def __init__(self, job_id, next_seq):
        super().__init__(job_id, next_seq, time.monotonic())


class Client(ClientCore):
    """Talks to one conveyor server.

    router, pub: the server's ROUTER and PUB endpoints.
    request_timeout: seconds to wait for each reply; a request is sent 1 + retries times, on a
        fresh DEALER each time (ZeroMQ's "lazy pirate"), before ConveyorTimeout.
    idle_fetch_s: a streamed job with no new event for this long is fetched (the lost event may
        have been its last one).
    first_event_s: a job with no event at all this long after submit is fetched once (its
        first events may have beaten the new subscription to the server; see TrackedJob).
    curve_server_key, curve_public_key, curve_secret_key: Z85 keys for a server running CURVE
        (all three or none; load_curve_keys reads them from `conveyor keygen` files).
    """

    def __init__(self, router=DEFAULT_ROUTER, pub=DEFAULT_PUB, *, context=None,
                 request_timeout=10.0, retries=2, idle_fetch_s=1.0, first_event_s=0.05,
                 fetch_batch=1024, curve_server_key=None, curve_public_key=None,
                 curve_secret_key=None):
        super().__init__(context or zmq.Context.instance(), _Tracked, router, pub, request_timeout,
                         retries, idle_fetch_s, first_event_s, fetch_batch, curve_server_key,
                         curve_public_key, curve_secret_key)

    # --- lifetime --------------------------------------------------------------------------
    def close(self):
        self._close_sockets()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _open_dealer(self):
        super()._open_dealer(send_timeout_ms=int(self._request_timeout * 1000))

    # --- requests --------------------------------------------------------------------------
    def _request(self, msg):
        """Sends msg, returns (reply map, attempt number). Resends on a fresh socket on timeout."""
        data = pack(msg)
        for attempt in range(self._retries + 1):
            try:
                self._dealer.send(data)
                if self._dealer.poll(int(self._request_timeout * 1000), zmq.POLLIN):
                    return self._decode_reply(self._dealer.recv(), msg), attempt
            except zmq.Again:
                pass
            self._open_dealer()  # a late reply to the lost attempt must not be read as ours
        raise self._no_reply(msg)

    def _call(self, msg):
        return check_reply(self._request(msg)[0], msg.get("id"))

    def submit(self, prompt=None, messages=None, prompt_tokens=None, id=None, **params):
        """Submits one job and returns its id (a new uuid4 when id is None). params are the
        protocol's submit fields (max_tokens, temperature, stop, stream, ...). The job's topic
        is subscribed before the submit is sent, so no event is missed. Raises ConveyorError
        when the server refuses the job; a `duplicate` answer to a resend counts as accepted."""
        msg = build_submit(id, prompt, messages, prompt_tokens, **params)
        job_id = msg["id"]
        was_tracked = job_id in self._jobs
        self._track(job_id)
        try:
            self._submit_accepted(*self._request(msg), job_id)
        except BaseException:
            if not was_tracked:
                self.forget(job_id)
            raise
        return job_id

    def cancel(self, job_id):
        """Cancels a job; returns its state afterwards ("cancelled", or its final state)."""
        return self._call({"op": "cancel", "id": job_id})["state"]

    def status(self, job_id):
        """The status reply: state, prompt_tokens, completion_tokens, next_seq, finish_reason?"""
        return self._call({"op": "status", "id": job_id})

    def fetch(self, job_id, from_seq=0, max_events=1024):
        """The fetch reply: {"events": [...], "complete": bool, ...}."""
        return self._call({"op": "fetch", "id": job_id, "from_seq": from_seq,
                           "max_events": max_events})

    def stats(self):
        return self._call({"op": "stats"})

    def health(self):
        return self._call({"op": "health"})

    # --- events ----------------------------------------------------------------------------
    def attach(self, job_id, from_seq=0):
        """Collects the events of a job this client did not submit (another producer's, or one
        a previous run submitted) from from_seq on: poll() and stream() deliver them, its history
        fetched on their next round (a late join, protocol section 3.2). Returns job_id."""
        if not valid_id(job_id):
            raise ValueError("job id must be 1-128 characters of [A-Za-z0-9._:/-], got %r"
                             % (job_id,))
        self._track(job_id, from_seq)
        return job_id

    def _pump(self, timeout_s):
        """Receives what the SUB socket has, waiting up to timeout_s for the first message."""
        if not self._sub.poll(max(0, int(timeout_s * 1000)), zmq.POLLIN):
            return
        while True:
            try:
                frames = self._sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._dispatch(frames)

    def _repair(self, tracked):
        """Fetches from the job's next_seq until the hole is filled or history ends."""
        tracked.fetched(time.monotonic())
        try:
            while not tracked.seq.finished:
                reply = self.fetch(tracked.seq.job_id, tracked.seq.next_seq, self._fetch_batch)
                if self._filed_fetch(tracked, reply):
                    break
        except ConveyorError as e:
            tracked.error = e

    def _maintain(self):
        now = time.monotonic()
        for tracked in list(self._jobs.values()):
            if tracked.seq.finished or tracked.error is not None:
                continue
            if tracked.fetch_due(now, self._idle_fetch_s, self._first_event_s) <= 0:
                self._repair(tracked)
                if isinstance(tracked.error, ConveyorTimeout):
                    return  # the server does not answer: the next fetch waits for the next round

    def _next_fetch_in(self):
        now = time.monotonic()
        due = [t.fetch_due(now, self._idle_fetch_s, self._first_event_s)
               for t in self._jobs.values() if not t.seq.finished and t.error is None]
        return max(0.001, min(due, default=self._idle_fetch_s))

    def stream(self, job_id, timeout=None, from_seq=0):
        """Yields the job's events in seq order, without gaps, ending with its terminal event
        (done or error; an error event is yielded, not raised). A job this client did not
        submit is joined late: its history is fetched from from_seq first. Raises
        ConveyorTimeout when timeout seconds pass without the terminal event (calling stream()
        again resumes), ConveyorError when the server forgot the job."""
        tracked = self._jobs.get(job_id)
        if tracked is None:
            tracked = self._track(job_id, from_seq)
            self._repair(tracked)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            events = tracked.seq.take()
            if tracked.seq.finished:
                self.forget(job_id)
            yield from events
            if tracked.seq.finished:
                return
            if tracked.error is not None:
                self.forget(job_id)
                raise tracked.error
            wait = max(0.001, tracked.fetch_due(time.monotonic(), self._idle_fetch_s,
                                                self._first_event_s))
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise ConveyorTimeout("job %s: no terminal event within %ss"
                                          % (job_id, timeout), job_id)
            self._pump(wait)
            self._maintain()

    def poll(self, timeout=0.0):
        """Ready events of every job this client tracks, as (id, event) pairs in seq order per
        job, waiting up to timeout seconds for the first. A job stops being tracked after its
        terminal event. A job that failed on the client side (the server forgot it) gets one
        error event with seq None."""
        deadline = time.monotonic() + timeout
        while True:
            out = []
            for job_id, tracked in list(self._jobs.items()):
                out.extend((job_id, ev) for ev in tracked.seq.take())
                if tracked.seq.finished:
                    self.forget(job_id)
                elif tracked.error is not None:
                    e = tracked.error
                    out.append((job_id, {"id": job_id, "seq": None, "kind": "error",
                                         "code": e.code, "message": e.message}))
                    self.forget(job_id)
            remaining = deadline - time.monotonic()
            if out or remaining <= 0:
                return out
            self._pump(min(remaining, self._next_fetch_in()))
            self._maintain()

    def wait(self, job_id, timeout=None):
        """The job's done event; raises ConveyorError if it ended with an error event."""
        last = None
        for last in self.stream(job_id, timeout):
            pass
        return raise_for_event(last)

    def generate(self, prompt=None, messages=None, prompt_tokens=None, id=None, timeout=None,
                 **params):
        """Submits a job and returns its full output text. Sends "stream": false unless given
        (only the final text is needed). Raises ConveyorError on rejection or an error event."""
        params.setdefault("stream", False)
        job_id = self.submit(prompt, messages, prompt_tokens, id, **params)
        return self.wait(job_id, timeout)["text"]

    def generate_n(self, n, prompt=None, messages=None, prompt_tokens=None, id=None, timeout=None, **params):
        """n choices of one request, as the HTTP API's `n`: jobs <id>/0 .. <id>/<n-1> (id: a new
        uuid4 when None), choice i with seed + i when a seed is given (else the server picks each
        one's). Choice 0 runs first and the others once it is done, so they find its prompt in the
        prefix cache. Returns the n output texts in choice order."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 16:
            raise ValueError("n must be an integer in [1, 16]")
        base = id if id is not None else new_id()
        seed = params.pop("seed", None)
        params.setdefault("stream", False)

        def submit(i):
            extra = {} if seed is None else {"seed": seed + i}
            return self.submit(prompt, messages, prompt_tokens, "%s/%d" % (base, i), **params, **extra)

        texts = [self.wait(submit(0), timeout)["text"]]
        rest = [submit(i) for i in range(1, n)]
        return texts + [self.wait(job_id, timeout)["text"] for job_id in rest]
