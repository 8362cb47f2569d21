#!/usr/bin/env python3
"""HTTP scale (issue 26): 1,000 concurrent streaming chat requests against `conveyor serve --device
sim`, with 200 slow-loris connections and 70 stalled bodies held open throughout and a /health probe
every 20 ms (clients/python/tests/http_scale_run.py). Prints a table, writes --json.

    .venv/bin/python scripts/http_scale.py --streams 1000 --json http_scale.json
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "tests"))

from http_scale_run import run_scale  # noqa: E402

ROWS = [("concurrent streaming requests", "streams"), ("complete streams", "complete"),
        ("incomplete / errors / non-200", None), ("most streams open at once", "open_at_once_max"),
        ("slow-loris connections made (headers 1 byte/s)", "loris_connections"),
        ("stalled bodies (Content-Length 100, 1 byte)", "stalled_connections"),
        ("/health probes answered / failed", None), ("/health p50 / p99 / max (ms)", None),
        ("server RSS before / with every stream open (MB)", None), ("RSS growth per open stream (KB)", "rss_growth_kb_per_stream"),
        ("wall time (s)", "wall_s")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "conveyor"))
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--slow-loris", type=int, default=200)
    ap.add_argument("--stalled", type=int, default=70)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    r = run_scale(os.path.abspath(a.binary), a.streams, a.max_tokens, a.slow_loris, a.stalled)
    special = {"incomplete / errors / non-200": "%d / %d / %d" % (r["incomplete"], r["errors"], r["bad_status"]),
               "/health probes answered / failed": "%d / %d" % (r["health_probes"], r["health_failures"]),
               "/health p50 / p99 / max (ms)": "%s / %s / %s" % (r["health_p50_ms"], r["health_p99_ms"], r["health_max_ms"]),
               "server RSS before / with every stream open (MB)": "%s / %s" % (r["rss_before_mb"], r["rss_peak_mb"])}
    print("| measurement | value |\n|---|---|")
    for label, key in ROWS:
        print("| %s | %s |" % (label, special[label] if key is None else r[key]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=2)
    ok = r["complete"] == a.streams and r["health_failures"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
