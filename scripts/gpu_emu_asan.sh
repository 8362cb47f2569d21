#!/usr/bin/env bash
# ctest `gpu_emu_asan` (label gpu-emu): the emulated GPU tier (tests/gpu_emu, docs/gpu-emulator.md)
# under AddressSanitizer + UBSan. Configures a sub-build of this tree with CONVEYOR_SANITIZE=ON and
# CUDA off (no nvcc: only the emulated build), builds gpu_emu_tests there (ccache, nice) and runs
# it in forward thread order. The Release build's own three orders run beside it.
#   scripts/gpu_emu_asan.sh SOURCE_DIR SUB_BUILD_DIR ARCH_MODELS_DIR
set -euo pipefail
src=$1 bin=$2 models=$3
source "$(dirname "$0")/emu_subbuild.sh"
emu_subbuild gpu_emu_asan "$src" "$bin" "ASan+UBSan" -DCONVEYOR_SANITIZE=ON
ln -sfn "$models" "$bin/arch_models"  # the tiny architecture models the Release build wrote
echo "gpu_emu_asan: running"
exec "$bin/tests/gpu_emu/gpu_emu_tests" --color_output=no --log_level=warning
