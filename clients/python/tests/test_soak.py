"""The soak of issue 26, short (scripts/soak.py runs it for 10 minutes): pipelined DEALERs with
deadline_ms 1..5, PUSHes and HTTP requests with reused ids and client timeouts against the null
executor with the journal on, the server SIGKILLed and restarted between phases. Every request
gets exactly one reply, no journal write is refused, the server never stops itself, and every
accepted job is complete with seqs 0..n-1 (soak_run has the checks)."""
import os
import random

import pytest

CONVEYOR_BIN = os.environ.get("CONVEYOR_BIN")
if not CONVEYOR_BIN:
    pytest.skip("CONVEYOR_BIN is not set (ctest's python_client test sets it)", allow_module_level=True)

from soak_run import run_soak  # noqa: E402


def test_short_soak_every_request_answered_no_job_lost(tmp_path):
    seed = int(os.environ.get("CONVEYOR_SOAK_SEED") or random.SystemRandom().randrange(2 ** 32))
    r = run_soak(os.path.abspath(CONVEYOR_BIN), str(tmp_path), seed, phases=3, phase_s=4.0, dealers=3, pushers=1,
                 http_clients=3, zmq_rate=300)
    print("soak seed %d: %s" % (seed, {k: v for k, v in r.items() if k != "problems"}))
    assert r["requests_without_exactly_one_reply"] == 0, r
    assert r["journal_refused_writes"] == 0 and r["server_self_stops"] == 0, r
    assert r["jobs_lost_or_broken"] == 0, r
    assert r["restarts"] == 2 and r["accepted_jobs"] > 1000, r
    assert r["counts"].get("http_200", 0) > 0, r
