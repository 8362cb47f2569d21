"""conveyor-pipe: JSONL jobs on stdin -> JSONL results on stdout.

Each input line is a submit map without "op" (the id is optional; a uuid4 is made up when it is
missing). At most --max-in-flight jobs run at once. One line per job is written to stdout, in
completion order:
    {"id", "text", "finish_reason", "usage", "timing"}   or   {"id", "error": {"code", "message"}}
A progress line goes to stderr. Jobs refused with `overloaded` are resubmitted after a pause.
Exit status: 0 when every job finished, 1 when any job was refused or failed, 2 on bad usage.
"""
import argparse
import collections
import json
import sys
import time

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


class _Progress:
    def __init__(self, out, quiet):
        self.out, self.quiet = out, quiet
        self.read = self.done = self.failed = self.in_flight = 0
        self._last = 0.0

    def show(self, force=False):
        now = time.monotonic()
        if self.quiet or (not force and now - self._last < 0.2):
            return
        self._last = now
        self.out.write("\r %d/%d done, %d failed, %d in flight " %
                       (self.done, self.read, self.failed, self.in_flight))
        self.out.flush()


def _result(job_id, event):
    if event.get("kind") == "done":
        return {"id": job_id, "text": event.get("text"), "finish_reason": event.get("finish_reason"),
                "usage": event.get("usage"), "timing": event.get("timing")}
    return {"id": job_id, "error": {"code": event.get("code", "internal"),
                                    "message": event.get("message", "")}}


def run(args, stdin, stdout, stderr, client=None):
    """The pipe's loop; returns the exit status. `client` is for tests."""
    own = client is None
    client = client or Client(args.router, args.pub, request_timeout=args.request_timeout,
                              **getattr(args, "curve", {}))
    progress = _Progress(stderr, args.quiet)
    lines = iter(stdin)
    retry = collections.deque()      # (not_before, job map) refused as overloaded
    started = {}                      # id -> monotonic time accepted
    exhausted = False
    status = 0

    def emit(record, ok):
        nonlocal status
        stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        stdout.flush()
        if ok:
            progress.done += 1
        else:
            progress.failed += 1
            status = 1

    def next_job():
        nonlocal exhausted
        if retry and retry[0][0] <= time.monotonic():
            return retry.popleft()[1]
        while not exhausted:
            line = next(lines, None)
            if line is None:
                exhausted = True
                break
            if not line.strip():
                continue
            progress.read += 1
            try:
                job = json.loads(line)
                if not isinstance(job, dict):
                    raise ValueError("a job must be a JSON object")
            except ValueError as e:
                emit({"id": None, "error": {"code": "bad_request",
                                            "message": "input line %d: %s" % (progress.read, e)}},
                     False)
                continue
            job.pop("op", None)
            job.setdefault("id", new_id())
            job.setdefault("stream", False)   # only the final text is written out
            return job
        return None

    try:
        while True:
            while len(started) < args.max_in_flight:
                job = next_job()
                if job is None:
                    break
                try:
                    job_id = client.submit(**job)
                    started[job_id] = time.monotonic()
                except ConveyorError as e:
                    if e.code == "overloaded":
                        retry.append((time.monotonic() + args.overload_backoff, job))
                        break
                    emit({"id": job.get("id"), "error": {"code": e.code, "message": e.message}},
                         False)
                except (TypeError, ValueError) as e:
                    emit({"id": job.get("id"), "error": {"code": "bad_request",
                                                         "message": str(e)}}, False)
            progress.in_flight = len(started)
            progress.show()
            if not started and not retry and exhausted:
                break
            for job_id, event in client.poll(timeout=0.1):
                if event.get("kind") in ("done", "error") and job_id in started:
                    del started[job_id]
                    emit(_result(job_id, event), event.get("kind") == "done")
            if args.timeout is not None:
                now = time.monotonic()
                for job_id in [j for j, t in started.items() if now - t > args.timeout]:
                    del started[job_id]
                    client.forget(job_id)
                    emit({"id": job_id, "error": {"code": "timeout", "message":
                          "no result within %ss" % args.timeout}}, False)
    finally:
        progress.in_flight = len(started)
        progress.show(force=True)
        if not args.quiet:
            stderr.write("\n")
        if own:
            client.close()
    return status


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args, sys.stdin, sys.stdout, sys.stderr)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
