"""Puts one job's events back in seq order and says when a fetch must fill a hole.

PUB drops messages silently (slow joiners, full queues), so events can arrive with holes,
twice (live and fetched), or not at all. JobSequencer keeps what arrived, releases events
strictly in seq order from next_seq, and stops after the terminal event. It is pure: the
clients decide when to fetch (has_gap, or no progress for a while) and feed it the result.
"""
import collections

from .protocol import TERMINAL_KINDS


class JobSequencer:
    def __init__(self, job_id, next_seq=0):
        self.job_id = job_id
        #: The seq of the next event to release; every event below it has been released.
        self.next_seq = next_seq
        #: True once the terminal event has been released (nothing follows it).
        self.finished = False
        self._pending = {}
        self._ready = collections.deque()

    def add(self, event):
        """Files one event; returns True when it was new. Events of other jobs (prefix topics
        overlap), old or repeated seqs and anything after the terminal event are ignored."""
        if self.finished or not isinstance(event, dict) or event.get("id") != self.job_id:
            return False
        seq = event.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < self.next_seq \
                or seq in self._pending:
            return False
        self._pending[seq] = event
        while self.next_seq in self._pending:
            ev = self._pending.pop(self.next_seq)
            self._ready.append(ev)
            self.next_seq += 1
            if ev.get("kind") in TERMINAL_KINDS:
                self.finished = True
                self._pending.clear()
                break
        return True

    def add_all(self, events):
        """Files several events (a fetch reply); returns how many were new."""
        return sum(1 for ev in events if self.add(ev))

    @property
    def has_gap(self):
        """True when a later event arrived but next_seq did not: fetch from next_seq."""
        return bool(self._pending)

    def take(self):
        """The events ready to deliver, in seq order (each is returned once)."""
        out = list(self._ready)
        self._ready.clear()
        return out


class TrackedJob:
    """A job whose events a client collects: its sequencer, when it last made progress, whether
    the early check was done, and a failure that ended tracking (fetch said not_found, say).

    NOTE: a SUBSCRIBE travels to the server on the PUB connection while the submit travels on
    the DEALER's, so the server may publish a job's first events before the subscription lands.
    A job that shows no event `first_event_s` after tracking started is therefore fetched
    once early, instead of waiting the full idle time."""

    def __init__(self, job_id, next_seq, now):
        self.seq = JobSequencer(job_id, next_seq)
        self.start_seq = next_seq
        self.last_progress = now
        self.early_checked = False
        self.error = None

    def fetch_due(self, now, idle_fetch_s, first_event_s):
        """Seconds until a fetch is due (<= 0: now)."""
        if self.seq.has_gap:
            return 0.0
        if not self.early_checked and self.seq.next_seq == self.start_seq:
            return min(first_event_s, idle_fetch_s) - (now - self.last_progress)
        return idle_fetch_s - (now - self.last_progress)

    def fetched(self, now):
        self.early_checked = True
        self.last_progress = now
