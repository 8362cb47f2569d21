#!/usr/bin/env python3
"""Golden logits and greedy tokens from llama.cpp for the tiny models of scripts/make_arch_models.py.

  python scripts/make_arch_goldens.py [--out tests/data/arch_goldens.json]

Builds llama.cpp (scripts/build_llama_cpp.sh) and its logits program (scripts/llama_ref/build.sh) when
needed, writes the tiny models into a temporary directory, and for every GGUF there runs
llama.cpp on the CPU (one thread, f32 KV cache, no flash attention) over a fixed prompt of token
ids, then greedy for N_GEN tokens. Writes, per model file: its sha256 (the tests check the file
they load is this one), the last prompt position's logits, and each greedy token with the logits
that followed it.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROMPT = [1, 50, 120, 7, 260, 33, 90, 15, 200, 77, 5, 140, 61, 230, 19]
N_GEN = 12


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, **kw).stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "arch_goldens.json"))
    args = ap.parse_args()
    logits_bin = run([os.path.join(HERE, "llama_ref", "build.sh"), "llama_logits"]).splitlines()[-1]
    src = run([os.path.join(HERE, "fetch_llama_src.sh")]).splitlines()[-1]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(HERE, "make_arch_models.py"), tmp], check=True)
        with open(os.path.join(tmp, "manifest.json")) as f:
            manifest = json.load(f)
        models = {}
        for name in sorted(n for n in manifest if n.endswith(".gguf")):
            out = json.loads(run([logits_bin, os.path.join(tmp, name), ",".join(map(str, PROMPT)), str(N_GEN)]))
            models[name] = {
                "sha256": manifest[name],
                "prompt_logits": [float(f"{x:.7g}") for x in out["prompt_logits"]],
                "greedy": [g["token"] for g in out["greedy"]],
                "greedy_logits": [[float(f"{x:.7g}") for x in g["logits"]] for g in out["greedy"]],
            }
            print(f"make_arch_goldens: {name}: greedy {models[name]['greedy']}", file=sys.stderr)
    golden = {
        "reference": "llama.cpp as vendored in llama-cpp-python 0.3.36 (" + os.path.relpath(src, os.path.expanduser("~")) + ")",
        "produced_by": "scripts/make_arch_goldens.py (models: scripts/make_arch_models.py; logits: scripts/llama_ref/llama_logits.cpp)",
        "settings": "CPU, 1 thread, f32 KV cache, flash attention off, one batch for the prompt, then one token per decode",
        "prompt": PROMPT,
        "models": models,
    }
    with open(args.out, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    print(f"make_arch_goldens: wrote {args.out} ({os.path.getsize(args.out) // 1024} KiB)", file=sys.stderr)


if __name__ == "__main__":
    main()
