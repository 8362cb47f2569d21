#!/usr/bin/env bash
# ctest `gpu_emu_tsan` (label gpu-emu): the CUDA emulator as a race detector (tests/gpu_emu/src/tsan.hpp,
# docs/gpu-emulator.md "Races"). Configures a sub-build of this tree with CONVEYOR_TSAN=ON and CUDA
# off, builds gpu_emu_tests there (ccache, nice), then
#   1. runs the planted race (emulator_races/shared_memory_ordered_only_by_shuffles) and fails
#      unless ThreadSanitizer reports it: the detector works;
#   2. runs the kernel suites (the ones compute-sanitizer's racecheck covers on a GPU) and fails on
#      any report.
#   scripts/gpu_emu_tsan.sh SOURCE_DIR SUB_BUILD_DIR ARCH_MODELS_DIR
set -uo pipefail
src=$1 bin=$2 models=$3
mkdir -p "$bin"
export CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=1
echo "gpu_emu_tsan: configuring $bin (CONVEYOR_TSAN=ON, no CUDA)"
if ! cmake -S "$src" -B "$bin" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-g1 -DCONVEYOR_TSAN=ON -DCONVEYOR_CUDA=OFF >"$bin/configure.log" 2>&1; then
  tail -30 "$bin/configure.log"
  echo "gpu_emu_tsan: configure failed (log: $bin/configure.log)" >&2
  exit 1
fi
echo "gpu_emu_tsan: building gpu_emu_tests with ThreadSanitizer (first time: several minutes)"
if ! nice cmake --build "$bin" --target gpu_emu_tests -j "$(nproc)" >"$bin/build.log" 2>&1; then
  grep -E "error|Error" "$bin/build.log" | head -30
  echo "gpu_emu_tsan: build failed (log: $bin/build.log)" >&2
  exit 1
fi
ln -sfn "$models" "$bin/arch_models"
tests=$bin/tests/gpu_emu/gpu_emu_tests
# OpenBLAS (the emulated cuBLASLt) on one thread: its pool synchronizes in ways TSan cannot see.
export OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS="exitcode=66 history_size=4 ${TSAN_OPTIONS:-}"

echo "gpu_emu_tsan: the planted race must be reported"
CONVEYOR_EMU_EXPECT_RACE=1 "$tests" --run_test=emulator_races/shared_memory_ordered_only_by_shuffles \
  --color_output=no --log_level=warning >"$bin/planted.log" 2>&1
rc=$?
if [ $rc != 66 ] || ! grep -q "ThreadSanitizer: data race" "$bin/planted.log" || ! grep -q "running_max_kernel<false>.*race_test.cpp" "$bin/planted.log"; then
  tail -40 "$bin/planted.log"
  echo "gpu_emu_tsan: FAILED: the race planted in tests/gpu_emu/tests/race_test.cpp was not reported (exit $rc)" >&2
  exit 1
fi
echo "gpu_emu_tsan: reported ($(grep -c 'ThreadSanitizer: data race' "$bin/planted.log") report(s), exit $rc)"

suites=gpu_kernels,gpu_attention_sampling,gpu_attention_wmma,gpu_arena,emulator_races
echo "gpu_emu_tsan: running $suites"
"$tests" --run_test=$suites --color_output=no --log_level=warning --report_level=short 2>&1 | tee "$bin/suites.log"
rc=${PIPESTATUS[0]}
if [ $rc != 0 ]; then
  echo "gpu_emu_tsan: FAILED (exit $rc$([ $rc = 66 ] && echo ': ThreadSanitizer reported races, above'))" >&2
  exit 1
fi
