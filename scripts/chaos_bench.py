#!/usr/bin/env python3
"""Chaos benchmark: a steady load of jobs on `conveyor serve` (CPU executor, SmolLM2), SIGKILLed
at --kills random moments and restarted each time on the same state dir and endpoints, then the
checks of clients/python/tests/chaos_check.py for every job. Prints a table, writes --json.

    .venv/bin/python scripts/chaos_bench.py --kills 50 --json out.json

Progress goes to stderr. Exit status 1 when any check failed (the problems are printed, with the
seed and the server logs' tails; the run's directory is kept).
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "tests"))

from chaos_check import summary  # noqa: E402
from chaos_run import run_chaos  # noqa: E402

ROWS = [("kills", "kills"), ("jobs submitted", "submitted"), ("accepted", "accepted"),
        ("finished", "finished"), ("lost (accepted, no terminal event; goal 0)", "lost"),
        ("duplicated events (a seq seen twice; goal 0)", "duplicated_events"),
        ("gaps after repair (fetch from 0)", "gaps_after_repair"),
        ("text mismatches (done.text vs deltas)", "text_mismatches"),
        ("other check failures", "other_failures"), ("total wall time", "wall_s"),
        ("mean restart-to-serving time", "mean_restart_to_serving_s")]
OTHER = ("refused", "failed", "conflicting_events", "second_terminal_live", "out_of_order_live",
         "live_not_in_fetch", "usage_mismatches", "status_mismatches", "resubmit_not_duplicate",
         "changed_by_restart")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--bin", default=os.environ.get("CONVEYOR_BIN", os.path.join(ROOT, "build", "conveyor")))
    p.add_argument("--seed", type=int, help="default: random (printed)")
    p.add_argument("--inflight", type=int, default=12, help="most accepted jobs unfinished at once")
    p.add_argument("--interval", type=float, nargs=2, default=(0.05, 0.5), metavar=("MIN", "MAX"),
                   help="seconds between submits")
    p.add_argument("--kill-delay", type=float, nargs=2, default=(0.3, 6.0), metavar=("MIN", "MAX"),
                   help="seconds from serving to the next SIGKILL")
    p.add_argument("--max-tokens", type=int, nargs=2, default=(24, 64), metavar=("MIN", "MAX"))
    p.add_argument("--push-every", type=int, default=4, help="every Nth job is PUSHed (0: none)")
    p.add_argument("--poison-after", type=int, default=0,
                   help="the server's --poison-after (0: jobs resume through any number of kills)")
    p.add_argument("--early-kill", type=float, default=0.1, metavar="P",
                   help="chance that a kill lands during the restart's start-up instead (0..1)")
    p.add_argument("--submit-kill", type=float, default=0.25, metavar="P",
                   help="chance that a kill lands 0-20 ms after a submit goes out (0..1)")
    p.add_argument("--workdir", help="state dir and logs (default: a temporary dir, removed on success)")
    p.add_argument("--json", help="write the report here")
    return p.parse_args(argv)


def table(report):
    c = dict(report["counts"], kills=report["kills"], wall_s="%.1f s" % report["wall_s"],
             mean_restart_to_serving_s="%.2f s" % report["mean_restart_to_serving_s"],
             other_failures=sum(report["counts"][k] for k in OTHER))
    out = ["| metric | value |", "|---|---|"]
    out += ["| %s | %s |" % (label, c[key]) for label, key in ROWS]
    return "\n".join(out)


def main(argv=None):
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2 ** 32)
    workdir = args.workdir or tempfile.mkdtemp(prefix="conveyor-chaos-")
    print("chaos bench: seed %d, %d kills, workdir %s" % (seed, args.kills, workdir), file=sys.stderr)
    report = run_chaos(os.path.abspath(args.bin), workdir, seed, kills=args.kills, jobs=None,
                       interval_s=tuple(args.interval), inflight=args.inflight,
                       kill_delay_s=tuple(args.kill_delay), max_tokens=tuple(args.max_tokens),
                       push_every=args.push_every, finish_timeout_s=300,
                       poison_after=args.poison_after, early_kill_p=args.early_kill,
                       submit_kill_p=args.submit_kill)
    python = os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(ROOT + os.sep) else sys.executable
    report["command"] = " ".join([python, "scripts/chaos_bench.py"] + (argv if argv is not None else sys.argv[1:]))
    report["ok"] = not report["problems"] and report["all_ended_before_final_restart"]
    print(table(report))
    c = report["counts"]
    print("\n%d submits retried across a kill (%d answered duplicate); %d events live, %d fetched; "
          "%d terminal events missed live (repaired by fetch); %d job resumptions over %d restarts"
          % (c["retried_submits"], c["duplicate_on_retry"], c["live_events"], c["fetched_events"],
             c["live_terminal_missed"], report["resumed_total"], report["kills"]))
    kl = report["kill_log"]
    print("kills: %d while serving (%d of them 0-20 ms after a submit went out), %d during a restart's "
          "start-up; %.1f accepted jobs unfinished at a kill on average; %d jobs ended by a stop string"
          % (sum(not k["during_start_up"] for k in kl), sum(k["after_submit"] for k in kl),
             sum(k["during_start_up"] for k in kl), sum(k["unfinished"] for k in kl) / max(1, len(kl)),
             c["ended_by_stop_string"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if not report["ok"]:
        print("\nFAILED\n%s\n%s" % (summary(report), report["server_logs"]), file=sys.stderr)
        print("run directory kept: %s" % workdir, file=sys.stderr)
        return 1
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
