#!/usr/bin/env bash
# conveyor's CPU executor next to llama.cpp on this machine, in one run (docs/benchmarks.md):
# single-stream `conveyor generate` timings, `conveyor step-bench` prefill and decode steps at
# batch 1/8/32/128, and the same measurements from llama.cpp through llama-cpp-python.
#
#   tools/bench_cpu.sh [python-with-llama-cpp]   (default: .venv/bin/python)
#   # llama-cpp-python builds llama.cpp from source: .venv/bin/pip install llama-cpp-python==0.3.36
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-.venv/bin/python}
out=${BENCH_OUT:-bench-results}
mkdir -p "$out"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load: $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD)"
echo
echo "== conveyor generate (single stream, greedy, 128 new tokens)"
build/conveyor generate --model smollm2 --temperature 0 --ignore-eos --max-tokens 128 \
  --prompt "The history of the printing press begins in the fifteenth century, when" 2>&1 >/dev/null | tail -1
echo
echo "== conveyor step-bench"
build/conveyor step-bench --batches 1,8,32,128 --context 128 --steps 8 --prompt-len 512 --json "$out/conveyor_steps.json"
echo
echo "== llama.cpp (llama-cpp-python) step bench"
"$py" tools/bench_llamacpp.py --batches 1,8,32,128 --context 128 --steps 8 --prompt-len 512 --json "$out/llamacpp_steps.json" 2>/dev/null
