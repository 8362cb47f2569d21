#!/usr/bin/env python3
"""Soak (issue 26): 10 minutes of mixed ZeroMQ (pipelined DEALERs, deadline_ms 1..5), PUSH and HTTP
traffic (reused request ids, client timeouts) against `conveyor serve --device null` with the
journal on, killed (SIGKILL) and restarted on the same state dir between phases; then every
accepted job checked (clients/python/tests/soak_run.py). Prints a table, writes --json.

    .venv/bin/python scripts/soak.py --minutes 10 --restarts 3 --json soak.json

Exit status 1 when any check failed (the run's directory is kept then).
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

from soak_run import run_soak  # noqa: E402

ROWS = [("restarts (kill -9)", "restarts"), ("load time (s)", "load_s"), ("accepted jobs", "accepted_jobs"),
        ("events checked", "events_checked"),
        ("requests without exactly one reply (goal 0)", "requests_without_exactly_one_reply"),
        ("journal writes refused (goal 0)", "journal_refused_writes"), ("server self-stops (goal 0)", "server_self_stops"),
        ("accepted jobs lost or broken (goal 0)", "jobs_lost_or_broken"), ("wall time (s)", "wall_s")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "conveyor"))
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--dealers", type=int, default=3)
    ap.add_argument("--http-clients", type=int, default=8)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(2 ** 32)
    work = tempfile.mkdtemp(prefix="conveyor-soak-")
    phases = a.restarts + 1
    r = run_soak(os.path.abspath(a.binary), work, seed, phases=phases, phase_s=a.minutes * 60.0 / phases,
                 dealers=a.dealers, pushers=1, http_clients=a.http_clients)
    print("| measurement | value |\n|---|---|")
    for label, key in ROWS:
        print("| %s | %s |" % (label, r[key]))
    print("| traffic | %s |" % ", ".join("%s %d" % kv for kv in sorted(r["counts"].items())))
    print("seed %d" % seed)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=2)
    ok = not (r["requests_without_exactly_one_reply"] or r["journal_refused_writes"] or r["server_self_stops"]
              or r["jobs_lost_or_broken"])
    if not ok:
        print("FAILED (run directory kept: %s):\n%s" % (work, "\n".join(r["problems"])))
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
