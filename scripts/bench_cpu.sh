#!/usr/bin/env bash
# conveyor's CPU executor next to llama.cpp on this machine, in one run (issue 13): a thin wrapper
# around scripts/bench_cpu_vs_llamacpp.py, which builds llama.cpp from source when it is missing
# (scripts/build_llama_cpp.sh) and prints one markdown table. Arguments pass through:
#
#   scripts/bench_cpu.sh [--only decode,steps,prefill,serve,memory,llama3-8b] [--threads N] [--json FILE]
#   PYTHON=/path/to/python scripts/bench_cpu.sh   (default: .venv/bin/python; needs numpy and gguf)
#
# The AVX2 table on a host that also has AVX-512 (both sides limited to AVX2/FMA/F16C):
#   ISA=avx2 scripts/build_llama_cpp.sh
#   CONVEYOR_ISA=avx2 scripts/bench_cpu.sh --llama-dir ~/.cache/conveyor/llama.cpp-0.3.36-avx2/bin ...
# The table's "conveyor kernels" line says which ISA conveyor's kernels ran and what was repacked.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" scripts/bench_cpu_vs_llamacpp.py "$@"
