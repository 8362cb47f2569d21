#!/usr/bin/env bash
# ctest `gpu_emu_asan` (label gpu-emu): the emulated GPU tier (tests/gpu_emu, docs/gpu-emulator.md)
# under AddressSanitizer + UBSan. Configures a sub-build of this tree with CONVEYOR_SANITIZE=ON and
# CUDA off (no nvcc: only the emulated build), builds gpu_emu_tests there (ccache, nice) and runs
# it in forward thread order. The Release build's own three orders run beside it.
#   scripts/gpu_emu_asan.sh SOURCE_DIR SUB_BUILD_DIR ARCH_MODELS_DIR
set -euo pipefail
src=$1 bin=$2 models=$3
mkdir -p "$bin"
export CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=1
echo "gpu_emu_asan: configuring $bin (CONVEYOR_SANITIZE=ON, no CUDA)"
if ! cmake -S "$src" -B "$bin" -DCMAKE_BUILD_TYPE=Release -DCONVEYOR_SANITIZE=ON -DCONVEYOR_CUDA=OFF >"$bin/configure.log" 2>&1; then
  tail -30 "$bin/configure.log"
  echo "gpu_emu_asan: configure failed (log: $bin/configure.log)" >&2
  exit 1
fi
echo "gpu_emu_asan: building gpu_emu_tests with ASan+UBSan (first time: several minutes)"
if ! nice cmake --build "$bin" --target gpu_emu_tests -j "$(nproc)" >"$bin/build.log" 2>&1; then
  grep -E "error|Error" "$bin/build.log" | head -30
  echo "gpu_emu_asan: build failed (log: $bin/build.log)" >&2
  exit 1
fi
ln -sfn "$models" "$bin/arch_models"  # the tiny architecture models the Release build wrote
echo "gpu_emu_asan: running"
exec "$bin/tests/gpu_emu/gpu_emu_tests" --color_output=no --log_level=warning
