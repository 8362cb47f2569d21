#!/usr/bin/env python3
"""conveyor demo: submits a few chat jobs at once to a running `conveyor serve`, streams their
tokens live, then prints a summary (per job: tokens, time to first token, decode rate, finish
reason; totals: wall time and output tokens/s).

    PYTHONPATH=clients/python .venv/bin/python scripts/demo.py [--router EP] [--pub EP] [--jobs N]

scripts/demo.sh starts a server, runs this, and stops the server. Exit status: 0 when every job
finished, 1 when one failed or the server did not answer, 130 on Ctrl-C (the jobs are cancelled).
"""
import argparse
import os
import shutil
import sys
import textwrap
import time
import uuid

from conveyor_client import DEFAULT_PUB, DEFAULT_ROUTER, Client, ConveyorError

PROMPTS = [
    "Explain what a data pipeline is in two sentences.",
    "Write a haiku about a busy train station.",
    "Give three tips for writing clear error messages.",
    "What is the difference between a process and a thread?",
    "Describe the smell of rain to someone who has never smelled it.",
    "Why do programmers use version control? Answer briefly.",
    "Suggest a name for a small bakery and explain why.",
    "Summarise the water cycle for a ten-year-old.",
]
COLOURS = ["36", "33", "35", "32", "34", "31", "96", "93"]  # ANSI foreground colours


def parse_args(argv):
    p = argparse.ArgumentParser(description="Stream several concurrent jobs from conveyor.")
    p.add_argument("--router", default=DEFAULT_ROUTER, help="server ROUTER endpoint")
    p.add_argument("--pub", default=DEFAULT_PUB, help="server PUB endpoint")
    p.add_argument("--jobs", type=int, default=4, help="jobs submitted at once (default 4)")
    p.add_argument("--max-tokens", type=int, default=64, help="output tokens per job")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--seed", type=int, default=1234, help="job i uses seed + i")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds to wait for all jobs (default 300)")
    p.add_argument("--plain", action="store_true",
                   help="no colours or live redraw, even on a terminal")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error("--jobs must be 1 or more")
    if args.max_tokens < 1:
        p.error("--max-tokens must be 1 or more")
    return args


class Job:
    def __init__(self, index, job_id, prompt):
        self.index, self.id, self.prompt = index, job_id, prompt
        self.label = "job %d" % (index + 1)
        self.text = ""
        self.tokens = 0
        self.state = "queued"
        self.done = None       # the done event
        self.error = None      # (code, message)
        self.submitted = None  # client-side monotonic times
        self.first_token = None
        self.finished = None
        self.pending_line = ""  # plain mode: text not yet printed

    @property
    def ended(self):
        return self.done is not None or self.error is not None


class Display:
    """Live view. On a terminal: one line per job, redrawn in place. Otherwise: every completed
    line of output, prefixed by its job."""

    def __init__(self, jobs, out, live):
        self.jobs, self.out, self.live = jobs, out, live
        self._drawn = False
        self._dirty = True
        self._last = 0.0

    def colour(self, job, s):
        if not self.live:
            return s
        return "\x1b[%sm%s\x1b[0m" % (COLOURS[job.index % len(COLOURS)], s)

    def update(self, job, delta):
        self._dirty = True
        if self.live:
            return
        job.pending_line += delta
        while "\n" in job.pending_line:
            line, job.pending_line = job.pending_line.split("\n", 1)
            if line.strip():
                self._print_line(job, line)

    def job_ended(self, job):
        self._dirty = True
        if not self.live:
            if job.pending_line.strip():
                self._print_line(job, job.pending_line)
                job.pending_line = ""
            self.out.write("[%s] -- %s\n" % (job.label, self._end_note(job)))
            self.out.flush()

    def _print_line(self, job, line):
        self.out.write("[%s] %s\n" % (job.label, line))
        self.out.flush()

    @staticmethod
    def _end_note(job):
        if job.error is not None:
            return "error %s: %s" % job.error
        return "%s, %d tokens" % (job.done["finish_reason"], job.tokens)

    def redraw(self, force=False):
        if not self.live:
            return
        now = time.monotonic()
        if not self._dirty or (not force and now - self._last < 0.05):
            return
        self._last = now
        self._dirty = False
        width = max(40, shutil.get_terminal_size((100, 24)).columns)
        lines = []
        for job in self.jobs:
            if job.ended:
                status = self._end_note(job)
            else:
                status = "%s, %d tokens" % (job.state, job.tokens)
            head = "%-6s %-22s " % (job.label, "(" + status + ")")
            room = width - len(head) - 1
            tail = " ".join(job.text.split())  # newlines and runs of spaces as one space
            if len(tail) > room:
                tail = "..." + tail[-(room - 3):]
            lines.append(self.colour(job, head) + tail)
        if self._drawn:
            self.out.write("\x1b[%dF" % len(lines))  # back to the first job's line
        self.out.write("".join("\x1b[2K" + line + "\n" for line in lines))
        self.out.flush()
        self._drawn = True


def print_answers(jobs, display, out):
    width = min(100, max(40, shutil.get_terminal_size((100, 24)).columns))
    for job in jobs:
        out.write("\n" + display.colour(job, "%s: %s" % (job.label, job.prompt)) + "\n")
        body = job.text.strip() if job.done else "(error: %s)" % (job.error,)
        for para in body.split("\n"):
            out.write(textwrap.fill(para, width, initial_indent="  ", subsequent_indent="  ")
                      + "\n" if para.strip() else "")
    out.flush()


def print_summary(jobs, wall_s, out):
    out.write("\n%-6s %7s %9s %10s %10s  %s\n" % ("job", "tokens", "TTFT ms", "decode/s",
                                                   "e2e ms", "finish"))
    total = 0
    for job in jobs:
        if job.done is None:
            out.write("%-6s %7s %9s %10s %10s  %s\n" % (job.label, "-", "-", "-", "-",
                                                        "error " + job.error[0]))
            continue
        n = job.done["usage"]["completion_tokens"]
        total += n
        timing = job.done["timing"]
        ttft, e2e = timing.get("ttft_ms"), timing["e2e_ms"]
        # Decode rate: the tokens after the first, over the time after the first.
        rate = (n - 1) / ((e2e - ttft) / 1000.0) if ttft is not None and n > 1 and e2e > ttft \
            else None
        out.write("%-6s %7d %9s %10s %10.0f  %s\n" % (
            job.label, n, "-" if ttft is None else "%.0f" % ttft,
            "-" if rate is None else "%.1f" % rate, e2e, job.done["finish_reason"]))
    out.write("total: %d jobs, %d output tokens in %.2f s wall time = %.1f output tokens/s\n"
              % (len(jobs), total, wall_s, total / wall_s if wall_s > 0 else 0.0))
    out.flush()


def run(args, out=sys.stdout):
    live = out.isatty() and not args.plain and os.environ.get("TERM") != "dumb"
    with Client(args.router, args.pub, request_timeout=5.0, retries=1) as client:
        try:
            health = client.health()
        except ConveyorError as e:
            sys.stderr.write("demo.py: no answer from the server at %s: %s\n" % (args.router, e))
            return 1
        out.write("conveyor %s, model %s: %d jobs at once, temperature %g, max_tokens %d\n"
                  % (health.get("status"), health.get("model"), args.jobs, args.temperature,
                     args.max_tokens))
        out.flush()
        run_id = uuid.uuid4().hex[:8]
        jobs = [Job(i, "demo-%s/%d" % (run_id, i), PROMPTS[i % len(PROMPTS)])
                for i in range(args.jobs)]
        by_id = {job.id: job for job in jobs}
        display = Display(jobs, out, live)
        t0 = time.monotonic()
        try:
            for job in jobs:
                job.submitted = time.monotonic()
                try:
                    client.submit(messages=[{"role": "user", "content": job.prompt}], id=job.id,
                                  max_tokens=args.max_tokens, temperature=args.temperature,
                                  seed=args.seed + job.index)
                except ConveyorError as e:
                    job.error = (e.code, e.message)
                    job.finished = time.monotonic()
                    display.job_ended(job)
            display.redraw(force=True)
            deadline = t0 + args.timeout
            while not all(job.ended for job in jobs):
                if time.monotonic() > deadline:
                    for job in jobs:
                        if not job.ended:
                            job.error = ("timeout", "no result within %gs" % args.timeout)
                            client.forget(job.id)
                            display.job_ended(job)
                    break
                for job_id, ev in client.poll(timeout=0.05):
                    job = by_id[job_id]
                    kind = ev.get("kind")
                    if kind == "tokens":
                        if job.first_token is None:
                            job.first_token = time.monotonic()
                        job.state = "running"
                        job.tokens += len(ev.get("token_ids", ()))
                        job.text += ev.get("text", "")
                        display.update(job, ev.get("text", ""))
                    elif kind == "done":
                        job.done = ev
                        job.text = ev.get("text", job.text)
                        job.finished = time.monotonic()
                        display.job_ended(job)
                    elif kind == "error":
                        job.error = (ev.get("code", "internal"), ev.get("message", ""))
                        job.finished = time.monotonic()
                        display.job_ended(job)
                display.redraw()
            display.redraw(force=True)
        except KeyboardInterrupt:
            for job in jobs:
                if not job.ended:
                    try:
                        client.cancel(job.id)
                    except ConveyorError:
                        pass
            out.write("\ninterrupted: the unfinished jobs were cancelled\n")
            return 130
        wall = max(j.finished for j in jobs) - t0
        if live:
            print_answers(jobs, display, out)
        print_summary(jobs, wall, out)
        ok = all(job.done is not None for job in jobs)
        return 0 if ok else 1


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
