"""conveyor-pipe: JSONL jobs on stdin -> JSONL results on stdout.

Each input line is a submit map without "op" (the id is optional; a uuid4 is made up when it is
missing). At most --max-in-flight jobs run at once. One line per job is written to stdout, in
completion order:
    {"id", "text", "finish_reason", "usage", "timing"}   or   {"id", "error": {"code", "message"}}
A progress line goes to stderr. Jobs refused with `overloaded` are resubmitted after a pause.

--resume: rerunning the same JSONL after the server or the pipe died re-attaches to the jobs the
server knows instead of running them again; the output still has exactly one line per input job.
  - A line without "id" gets resume_id(): "pipe-" and a hash of the line number (1-based, every
    line counted) and the job's canonical JSON (keys sorted, "op" dropped), so a rerun of the
    same file names the same jobs. The same job at the same line of another file gets the same id
    too, and re-attaches to the first one's result while the server remembers it (--retention).
  - A submit refused as `duplicate` is re-attached: the job's events are fetched from seq 0 and
    followed live (Client.attach), and its terminal event gives the line, as if this run had
    submitted it. A job the server lost (`not_found` while following it) is submitted once more.
  - While the server does not answer (a request times out after --request-timeout, resent as
    the Client does) or is draining (`shutting_down`), nothing is submitted and `health` is
    probed with a backoff; a server that does not answer also stops being asked about the jobs
    (they are parked). Once it serves again the refused jobs are resubmitted (one whose reply was
    lost then gets `duplicate`) and the parked ones re-attached. After --resume-timeout seconds
    (default 120) of this the pipe gives up: every job still open, and every line not read yet,
    gets a `timeout` error line. Parking all jobs, rather than retrying each on its own, keeps a
    pipe with many jobs in flight from waiting out one request timeout per job.
  Why ids are hashed and not kept in a local state file: the server's journal already knows every
  accepted job, so a rerun needs only to name the same jobs; nothing on the pipe's side can then
  disagree with the server. A job the server has forgotten (after --retention) runs again.
--format openai-batch: the input is OpenAI's Batch file format ({custom_id, method, url, body}
lines) and so is the output ({id, custom_id, response: {status_code, body}, error}), so a file
written for OpenAI's Batch API runs here unchanged (conveyor_client/openai_batch.py).
Exit status: 0 when every job finished, 1 when any job was refused or failed (or timed out, or
was given up on under --resume), 2 on bad usage, 130 on Ctrl-C.
"""
import argparse
import collections
import hashlib
import json
import sys
import time

from . import openai_batch
from .client import Client
from .curve import load_curve_keys
from .protocol import DEFAULT_PUB, DEFAULT_ROUTER, ConveyorError, new_id


def parse_args(argv):
    p = argparse.ArgumentParser(prog="conveyor-pipe", description=__doc__.split("\n")[0])
    p.add_argument("--router", default=DEFAULT_ROUTER, help="server ROUTER endpoint")
    p.add_argument("--pub", default=DEFAULT_PUB, help="server PUB endpoint")
    p.add_argument("--max-in-flight", type=int, default=32, help="most jobs running at once")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds a job may take after acceptance (default: no limit)")
    p.add_argument("--request-timeout", type=float, default=10.0,
                   help="seconds to wait for each reply from the server")
    p.add_argument("--overload-backoff", type=float, default=0.5,
                   help="seconds to wait before resubmitting a job refused as overloaded")
    p.add_argument("--resume", action="store_true",
                   help="re-attach to jobs the server knows (ids without one are derived from the "
                        "line) and wait out a server restart; see the module docstring")
    p.add_argument("--resume-timeout", type=float, default=120.0,
                   help="--resume: seconds without an answer from the server before giving up")
    p.add_argument("--format", choices=("conveyor", "openai-batch"), default="conveyor",
                   help="conveyor: submit maps in, result maps out; openai-batch: OpenAI's Batch "
                        "file format in and out")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    p.add_argument("--curve-server-key", metavar="FILE",
                   help="CURVE: the server's public key file (NAME.pub); needs --curve-key")
    p.add_argument("--curve-key", metavar="FILE",
                   help="CURVE: this client's key file (NAME.key from `conveyor keygen`, its .pub "
                        "listed in the server's --authorized-keys); needs --curve-server-key")
    args = p.parse_args(argv)
    if args.max_in_flight < 1:
        p.error("--max-in-flight must be 1 or more")
    args.curve = {}
    if (args.curve_server_key is None) != (args.curve_key is None):
        p.error("--curve-server-key and --curve-key go together: give both or neither")
    if args.curve_key is not None:
        try:
            args.curve = load_curve_keys(args.curve_server_key, args.curve_key)
        except ValueError as e:
            p.error(str(e))
    return args


def resume_id(job, line_number):
    """The id --resume gives a job line without one: the same for the same map (whatever its key
    order or spacing) at the same line number, different for anything else."""
    canonical = json.dumps(job, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    key = "%d\n%s" % (line_number, canonical)
    return "pipe-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


class _Progress:
    def __init__(self, out, quiet):
        self.out, self.quiet = out, quiet
        self.read = self.done = self.failed = self.in_flight = self.attached = 0
        self.note = ""
        self._last = 0.0

    def show(self, force=False):
        now = time.monotonic()
        if self.quiet or (not force and now - self._last < 0.2):
            return
        self._last = now
        self.out.write("\r %d/%d done, %d failed, %d in flight%s%s " % (
            self.done, self.read, self.failed, self.in_flight,
            ", %d re-attached" % self.attached if self.attached else "", self.note))
        self.out.flush()


def _result(job_id, event):
    if event.get("kind") == "done":
        return {"id": job_id, "text": event.get("text"), "finish_reason": event.get("finish_reason"),
                "usage": event.get("usage"), "timing": event.get("timing")}
    return {"id": job_id, "error": {"code": event.get("code", "internal"),
                                    "message": event.get("message", "")}}


class _Job:
    """One job of the input: its submit map, how many input lines wait on its id (a repeated
    explicit id re-attaches under --resume), when it was accepted, whether it was resubmitted."""

    def __init__(self, job, batch=None, group=None, index=0):
        self.job, self.lines, self.t0, self.resubmitted = job, 1, 0.0, False
        self.batch = batch   # --format openai-batch: (custom_id, url, model)
        self.group, self.index = group, index   # a Batch line's choice `index` of n
        self.tokens = [] if batch is not None and job.get("logprobs") else None   # Batch logprobs: tokens events


class _Choices:
    """A Batch line with n > 1: jobs <id>/0 .. <id>/n-1. Choice 0 runs first; the others are
    submitted when it is done, so they find the prompt in the prefix cache. One output line."""

    def __init__(self, base, rest):
        self.base, self.rest, self.events, self.tokens, self.failed = base, rest, {}, {}, False


class _Pipe:
    def __init__(self, args, stdin, stdout, stderr, client):
        self.args, self.client, self.stdout = args, client, stdout
        self.resume = getattr(args, "resume", False)
        self.batch = getattr(args, "format", "conveyor") == "openai-batch"
        self.resume_timeout = getattr(args, "resume_timeout", 120.0)
        self.progress = _Progress(stderr, args.quiet)
        self.lines = enumerate(stdin, 1)
        self.exhausted = False
        self.status = 0
        self.pending = collections.deque()   # (not_before, _Job) to submit (again)
        self.inflight = {}                    # id -> _Job accepted, followed or parked
        self.parked = set()                   # ids to re-attach when the server answers again
        self.down_since = None                # --resume: when the server stopped answering
        self.next_probe = 0.0
        self.backoff = 0.25

    def emit(self, record, ok, copies=1):
        for _ in range(copies):
            self.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
            if ok:
                self.progress.done += 1
            else:
                self.progress.failed += 1
                self.status = 1
        self.stdout.flush()

    def result(self, rec, job_id, event, tokens=None):
        """The output line of a job that ended with `event` (done or error)."""
        if rec is not None and rec.batch is not None:
            if tokens is None and rec.tokens is not None:
                tokens = [rec.tokens]
            top = rec.job.get("top_logprobs", 0) if rec.tokens is not None else None
            return openai_batch.output_line(*rec.batch, job_id, event, top=top, tokens=tokens)
        return _result(job_id, event)

    def fail(self, rec, job_id, code, message, copies=1, field=None, client_side=False):
        if rec is not None and rec.group is not None:   # one error line for the whole Batch line
            if rec.group.failed:
                return
            rec.group.failed, job_id = True, rec.group.base
        event = {"kind": "error", "code": code, "message": message, "field": field}
        if not client_side:
            event["seq"] = 0
        self.emit(self.result(rec, job_id, event), False, copies)

    def next_job(self):
        if self.pending and self.pending[0][0] <= time.monotonic():
            return self.pending.popleft()[1]
        for number, line in self.lines:
            if not line.strip():
                continue
            self.progress.read += 1
            try:
                job = json.loads(line)
                if not isinstance(job, dict):
                    raise ValueError("a job must be a JSON object")
            except ValueError as e:
                if self.batch:
                    self.emit(openai_batch.refused_line(None, openai_batch.LineError(
                        "input line %d: %s" % (number, e))), False)
                else:
                    self.emit({"id": None, "error": {"code": "bad_request", "message":
                                                     "input line %d: %s" % (number, e)}}, False)
                continue
            batch, n = None, 1
            if self.batch:
                try:
                    n = openai_batch.num_choices(job.get("body") or {})
                    custom_id, url, model, job = openai_batch.to_submit(job)
                except openai_batch.LineError as e:
                    self.emit(openai_batch.refused_line(job.get("custom_id"), e), False)
                    continue
                batch = (custom_id, url, model)
            job.pop("op", None)
            if job.get("id") is None:
                job.pop("id", None)
                job["id"] = resume_id(dict(job, n=n) if n > 1 else job, number) if self.resume else new_id()
            job.setdefault("stream", False)   # only the final text is written out
            if n > 1:
                base = job["id"]
                rest = [openai_batch.choice_job(job, i, "%s/%d" % (base, i)) for i in range(1, n)]
                return _Job(openai_batch.choice_job(job, 0, base + "/0"), batch, _Choices(base, rest), 0)
            return _Job(job, batch)
        self.exhausted = True
        return None

    def submit(self, rec):
        """Submits one job; False when no more should be submitted for now."""
        try:
            self.accept(self.client.submit(**rec.job), rec)
        except ConveyorError as e:
            if e.code == "overloaded":
                self.pending.append((time.monotonic() + self.args.overload_backoff, rec))
                return False
            if self.resume and e.code == "duplicate":
                self.accept(rec.job["id"], rec, attach=True)
            elif self.resume and e.code in ("timeout", "shutting_down"):
                self.pending.appendleft((0.0, rec))
                self.server_down(park=e.code == "timeout")
                return False
            else:
                self.fail(rec, rec.job.get("id"), e.code, e.message, field=e.field,
                          client_side=e.code == "timeout")
        except (TypeError, ValueError) as e:
            self.fail(rec, rec.job.get("id"), "bad_request", str(e))
        return True

    def accept(self, job_id, rec, attach=False):
        known = self.inflight.get(job_id)
        if known is not None:     # the same id on another line: one result, written for both
            known.lines += rec.lines
            return
        rec.t0 = time.monotonic()
        self.inflight[job_id] = rec
        if attach:
            self.client.attach(job_id)
            self.progress.attached += 1

    def server_down(self, park):
        if self.down_since is None:
            self.down_since = time.monotonic()
            self.next_probe, self.backoff = 0.0, 0.25
        if park:   # following the jobs would only wait out one request timeout per job
            for job_id in self.inflight:
                self.client.forget(job_id)
            self.parked.update(self.inflight)

    def probe(self):
        """--resume, server down: True once it serves again; gives up after --resume-timeout."""
        if time.monotonic() < self.next_probe:
            return False
        self.progress.note = ", server unreachable for %ds" % (time.monotonic() - self.down_since)
        self.progress.show(force=True)
        try:
            serving = self.client.health().get("status") == "serving"
        except ConveyorError:
            serving = False
        if serving:
            self.down_since, self.progress.note = None, ""
            for job_id in self.parked:
                self.client.attach(job_id)
            self.parked.clear()
            return True
        if time.monotonic() - self.down_since > self.resume_timeout:
            self.give_up()
        self.next_probe = time.monotonic() + self.backoff
        self.backoff = min(2 * self.backoff, 4.0)
        return False

    def give_up(self):
        message = "the server did not answer for %ss" % self.resume_timeout
        for job_id, rec in list(self.inflight.items()):
            self.client.forget(job_id)
            self.fail(rec, job_id, "timeout", message, rec.lines, client_side=True)
        self.inflight.clear()
        self.parked.clear()
        while True:
            rec = self.pending.popleft()[1] if self.pending else self.next_job()
            if rec is None:
                return
            self.fail(rec, rec.job.get("id"), "timeout", message, rec.lines, client_side=True)

    def on_event(self, job_id, event):
        rec = self.inflight.get(job_id)
        if rec is not None and rec.tokens is not None and event.get("kind") == "tokens":
            rec.tokens.append(event)   # (in seq order: the client repairs gaps with fetch)
        if rec is None or event.get("kind") not in ("done", "error"):
            return
        if self.resume and event.get("seq") is None:   # the client's failure, not the job's
            if event.get("code") == "timeout":
                self.parked.add(job_id)
                self.server_down(park=True)
                return
            if event.get("code") == "not_found" and not rec.resubmitted:
                rec.resubmitted = True               # the server lost it: run it once more
                rec.tokens = [] if rec.tokens is not None else None
                del self.inflight[job_id]
                self.pending.appendleft((0.0, rec))
                return
        del self.inflight[job_id]
        self.parked.discard(job_id)   # its end came in the batch that parked it
        if rec.group is not None:
            return self.on_choice(rec, event)
        self.emit(self.result(rec, job_id, event), event.get("kind") == "done", rec.lines)

    def on_choice(self, rec, event):
        g = rec.group
        if event.get("kind") != "done":
            return self.fail(rec, g.base, event.get("code", "internal"), event.get("message", ""), field=event.get("field"))
        g.events[rec.index], g.tokens[rec.index] = event, rec.tokens
        if rec.index == 0:
            for i, job in reversed(list(enumerate(g.rest, 1))):
                self.pending.appendleft((0.0, _Job(job, rec.batch, g, i)))
        if len(g.events) == len(g.rest) + 1 and not g.failed:
            order = range(len(g.events))
            tokens = [g.tokens[i] for i in order] if rec.tokens is not None else None
            self.emit(self.result(rec, g.base, [g.events[i] for i in order], tokens), True)

    def expire(self):
        now = time.monotonic()
        for job_id in [j for j, r in self.inflight.items() if now - r.t0 > self.args.timeout]:
            rec = self.inflight.pop(job_id)
            self.parked.discard(job_id)
            self.client.forget(job_id)
            self.fail(rec, job_id, "timeout", "no result within %ss" % self.args.timeout, rec.lines,
                      client_side=True)

    def loop(self):
        while True:
            if self.down_since is None or self.probe():
                while len(self.inflight) < self.args.max_in_flight and self.down_since is None:
                    rec = self.next_job()
                    if rec is None or not self.submit(rec):
                        break
            self.progress.in_flight = len(self.inflight)
            self.progress.show()
            if not self.inflight and not self.pending and self.exhausted:
                return self.status
            for job_id, event in self.client.poll(timeout=0.1):
                self.on_event(job_id, event)
            if self.args.timeout is not None:
                self.expire()


def run(args, stdin, stdout, stderr, client=None):
    """The pipe's loop; returns the exit status. `client` is for tests."""
    own = client is None
    client = client or Client(args.router, args.pub, request_timeout=args.request_timeout,
                              **getattr(args, "curve", {}))
    pipe = _Pipe(args, stdin, stdout, stderr, client)
    try:
        return pipe.loop()
    finally:
        pipe.progress.in_flight = len(pipe.inflight)
        pipe.progress.show(force=True)
        if not args.quiet:
            stderr.write("\n")
        if own:
            client.close()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args, sys.stdin, sys.stdout, sys.stderr)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
