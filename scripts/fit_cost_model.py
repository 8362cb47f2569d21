#!/usr/bin/env python3
"""Refit `conveyor sim`'s CPU cost model (engine/sim/cost_model.hpp) to measured step times.

Runs `conveyor step-bench` twice (decode at batch 1/8/32/128 with 128 tokens of context plus a
512-token prefill; decode at batch 8 with 1024 tokens of context), then fits

    step_ms = fixed_ms + per_token_ms * tokens + per_context_token_us / 1000 * context

(context = attended (token, context token) pairs, as engine/sim/cost_model.cpp counts them) by
least squares on relative error, and prints the table docs/benchmarks.md shows.

    .venv/bin/python scripts/fit_cost_model.py [--conveyor build/conveyor] [--model smollm2]
Run it on a quiet machine: the fit measures whatever else is running too.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def step_bench(conveyor, model, args):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([conveyor, "step-bench", "--model", model, "--json", f.name] + args, check=True,
                       stdout=subprocess.DEVNULL)
        return json.load(open(f.name))


def observations(conveyor, model, steps=8):
    """(label, tokens, context pairs, measured ms) for each timed step kind."""
    rows = []
    a = step_bench(conveyor, model, ["--batches", "1,8,32,128", "--context", "128", "--steps", str(steps),
                                     "--prompt-len", "512"])
    b = step_bench(conveyor, model, ["--batches", "8", "--context", "1024", "--steps", str(steps),
                                     "--prompt-len", "16"])
    for run in (a, b):
        c = run["context"]
        for d in run["decode"]:
            # step s of a sequence attends to c + s + 1 positions; the mean over the timed steps:
            per_token = c + (steps - 1) / 2.0 + 1.0
            rows.append(("decode, batch %d, context %d" % (d["batch"], c), d["batch"], d["batch"] * per_token,
                         d["step_ms"]))
    p = a["prefill"]["tokens"]
    rows.append(("prefill, %d tokens" % p, p, p * (p + 1) / 2.0, a["prefill"]["ms"]))
    return rows


def fit(rows):
    x = np.array([[1.0, t, c / 1000.0] for _, t, c, _ in rows])
    y = np.array([m for *_, m in rows])
    params, *_ = np.linalg.lstsq(x / y[:, None], np.ones(len(rows)), rcond=None)
    return params, x @ params


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conveyor", default=os.path.join(os.path.dirname(__file__), "..", "build", "conveyor"))
    ap.add_argument("--model", default="smollm2")
    o = ap.parse_args()
    rows = observations(o.conveyor, o.model)
    params, model = fit(rows)
    print("| measured step | ms | model |\n|---|---|---|")
    for (label, _, _, ms), m in zip(rows, model):
        print("| %s | %.1f | %.1f |" % (label, ms, m))
    rel = np.array([(m - r[3]) / r[3] for r, m in zip(rows, model)])
    print("\nfixed_ms %.2f  per_token_ms %.3f  per_context_token_us %.3f" % tuple(params))
    print("RMS relative error %.0f%%, worst %+.0f%%" % (100 * np.sqrt(np.mean(rel ** 2)), 100 * rel[np.argmax(abs(rel))]))
    if (params < 0).any():
        print("WARNING: a negative parameter: the measurements were noisy; run again on a quiet machine", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
