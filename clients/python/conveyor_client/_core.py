"""What Client and AsyncClient share and that does not wait: settings, sockets, the job table,
subscriptions, filing a SUB message, and reading replies. Each keeps its own waiting (blocking
polls or coroutines)."""
import time

import zmq

from .curve import apply_curve, check_curve
from .protocol import ConveyorError, ConveyorTimeout, check_reply, topic_for, unpack


class ClientCore:
    """Settings and sockets of a client on `context` (a zmq.Context or a zmq.asyncio.Context);
    `tracked_type(job_id, next_seq)` makes a job's TrackedJob."""

    def __init__(self, context, tracked_type, router, pub, request_timeout, retries, idle_fetch_s,
                 first_event_s, fetch_batch, curve_server_key, curve_public_key, curve_secret_key):
        self._curve = check_curve(curve_server_key, curve_public_key, curve_secret_key)
        self._ctx = context
        self._tracked_type = tracked_type
        self._router = router
        self._request_timeout = request_timeout
        self._retries = retries
        self._idle_fetch_s = idle_fetch_s
        self._first_event_s = first_event_s
        self._fetch_batch = fetch_batch
        self._jobs = {}
        #: The last heartbeat event seen on "sys/" (after subscribe_heartbeat()), or None.
        self.last_heartbeat = None
        self._dealer = None
        self._open_dealer()
        self._sub = self._socket(zmq.SUB)
        self._sub.setsockopt(zmq.RCVHWM, 100000)
        self._sub.connect(pub)

    def _socket(self, kind):
        sock = self._ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        apply_curve(sock, self._curve)
        return sock

    def _open_dealer(self, send_timeout_ms=None):
        """A fresh DEALER (a late reply to a lost attempt must not be read as the next one's)."""
        if self._dealer is not None:
            self._dealer.close(0)
        self._dealer = self._socket(zmq.DEALER)
        if send_timeout_ms is not None:
            self._dealer.setsockopt(zmq.SNDTIMEO, send_timeout_ms)
        self._dealer.connect(self._router)

    def _close_sockets(self):
        for sock in (self._dealer, self._sub):
            if sock is not None:
                sock.close(0)
        self._dealer = self._sub = None

    # --- requests --------------------------------------------------------------------------
    def _decode_reply(self, data, msg):
        try:
            return unpack(data)
        except ValueError as e:  # msgpack could not decode the reply
            raise ConveyorError("internal", "undecodable reply: %s" % e, id=msg.get("id"))

    def _no_reply(self, msg):
        return ConveyorTimeout("no reply from %s to %s after %d attempts"
                               % (self._router, msg.get("op"), self._retries + 1), msg.get("id"))

    @staticmethod
    def _submit_accepted(reply, attempt, job_id):
        """Raises when the submit reply refuses the job; a `duplicate` answer to a resend
        counts as accepted (the lost attempt got through)."""
        if attempt > 0 and not reply.get("ok") and \
                (reply.get("error") or {}).get("code") == "duplicate":
            return
        check_reply(reply, job_id)

    # --- events ----------------------------------------------------------------------------
    def _track(self, job_id, next_seq=0):
        tracked = self._jobs.get(job_id)
        if tracked is None:
            tracked = self._jobs[job_id] = self._tracked_type(job_id, next_seq)
            self._sub.setsockopt_string(zmq.SUBSCRIBE, topic_for(job_id))
        return tracked

    def forget(self, job_id):
        """Stops collecting a job's events (its buffered events are dropped)."""
        if self._jobs.pop(job_id, None) is not None and self._sub is not None:
            self._sub.setsockopt_string(zmq.UNSUBSCRIBE, topic_for(job_id))

    def subscribe_heartbeat(self):
        """Also receive "sys/" heartbeats (kept in last_heartbeat)."""
        self._sub.setsockopt_string(zmq.SUBSCRIBE, "sys/")

    def _dispatch(self, frames):
        """Files one SUB message; returns the job it brought a new event for, else None."""
        if len(frames) != 2:
            return None
        try:
            event = unpack(frames[1])
        except ValueError:
            return None
        if not isinstance(event, dict):
            return None
        if frames[0] == b"sys/":
            self.last_heartbeat = event
            return None
        tracked = self._jobs.get(event.get("id"))
        if tracked is not None and tracked.seq.add(event):
            tracked.last_progress = time.monotonic()
            return tracked
        return None

    def _filed_fetch(self, tracked, reply):
        """Files a fetch reply's events; True when the job's history has no more to fetch."""
        events = reply.get("events") or []
        new = tracked.seq.add_all(events)
        return bool(reply.get("complete")) or len(events) < self._fetch_batch or new == 0
