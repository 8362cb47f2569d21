#!/usr/bin/env bash
# ctest `gpu_emu_tsan` (label gpu-emu): the CUDA emulator as a race detector (tests/gpu_emu/src/tsan.hpp,
# docs/gpu-emulator.md "Races"). Configures a sub-build of this tree with CONVEYOR_TSAN=ON and CUDA
# off, builds gpu_emu_tests there (ccache, nice), then
#   1. runs the planted races (tests/gpu_emu/tests/race_test.cpp) and fails unless ThreadSanitizer
#      reports each: lanes ordered only by shuffles (threads mode: each CUDA thread a TSan fiber),
#      two blocks writing the same words (blocks mode, CONVEYOR_EMU_TSAN_MODE=blocks: each block
#      one fiber, blocks unordered);
#   2. runs the kernel suites in threads mode, and those plus the executor cases in blocks mode,
#      and fails on any report.
#   scripts/gpu_emu_tsan.sh SOURCE_DIR SUB_BUILD_DIR ARCH_MODELS_DIR
set -uo pipefail
src=$1 bin=$2 models=$3
source "$(dirname "$0")/emu_subbuild.sh"
emu_subbuild gpu_emu_tsan "$src" "$bin" "ThreadSanitizer" -DCMAKE_CXX_FLAGS=-g1 -DCONVEYOR_TSAN=ON
ln -sfn "$models" "$bin/arch_models"
tests=$bin/tests/gpu_emu/gpu_emu_tests
# Without address-space randomization where the kernel allows it: GCC 12's ThreadSanitizer
# refuses hosts whose mmap randomization is wider than it expects ("unexpected memory mapping").
run=()
setarch "$(uname -m)" -R true 2>/dev/null && run=(setarch "$(uname -m)" -R)
# halt_on_error: the first report ends the run (a race in a hot kernel otherwise repeats for every
# block of every launch, and the run's log grows until ctest's timeout).
export TSAN_OPTIONS="exitcode=66 history_size=4 halt_on_error=1 ${TSAN_OPTIONS:-}"

# planted NAME MODE TEST: runs TEST alone in TSan mode MODE and requires a race report naming NAME.
planted() {
  CONVEYOR_EMU_EXPECT_RACE=$1 CONVEYOR_EMU_TSAN_MODE=$1 "${run[@]}" "$tests" --run_test=emulator_races/$3 --color_output=no \
    --log_level=warning >"$bin/planted_$1.log" 2>&1
  local rc=$?
  if [ $rc != 66 ] || ! grep -q "ThreadSanitizer: data race" "$bin/planted_$1.log" || ! grep -q "$2.*race_test.cpp" "$bin/planted_$1.log"; then
    tail -40 "$bin/planted_$1.log"
    echo "gpu_emu_tsan: FAILED: the race planted in tests/gpu_emu/tests/race_test.cpp ($3, $1 mode) was not reported (exit $rc)" >&2
    exit 1
  fi
  echo "gpu_emu_tsan: $1 mode: the planted race is reported ($(grep -c 'ThreadSanitizer: data race' "$bin/planted_$1.log") report(s))"
}
planted threads "running_max_kernel<false>" shared_memory_ordered_only_by_shuffles
planted blocks "block_rows_kernel" blocks_writing_overlapping_rows

# suite MODE FILTER...: runs the tests the filters name (each a --run_test) in TSan mode MODE and
# fails on any report.
suite() {
  local mode=$1 start=$SECONDS filters=()
  shift
  for f in "$@"; do filters+=("--run_test=$f"); done
  echo "gpu_emu_tsan: $mode mode: $*"
  CONVEYOR_EMU_TSAN_MODE=$mode "${run[@]}" "$tests" "${filters[@]}" --color_output=no --log_level=warning --report_level=short 2>&1 |
    tee "$bin/suites_$mode.log"
  local rc=${PIPESTATUS[0]}
  if [ $rc != 0 ]; then
    echo "gpu_emu_tsan: FAILED in $mode mode (exit $rc$([ $rc = 66 ] && echo ': ThreadSanitizer reported races, above'))" >&2
    exit 1
  fi
  echo "gpu_emu_tsan: $mode mode: clean in $((SECONDS - start)) s"
}
kernels=gpu_kernels,gpu_attention_sampling,gpu_attention_wmma,gpu_arena,emulator_races
# Threads of a block: the kernel suites (the ones compute-sanitizer's racecheck covers on a GPU).
suite threads $kernels
# Blocks of a launch: the kernel suites and three executor cases (splits, padding rows with the
# whole pool in use, graph buckets padded by several rows: their K/V stores once raced);
# CONVEYOR_EMU_TSAN_ALL=1 runs every executor suite instead (~8 minutes).
cases=gpu_executor_cases/short_decodes_split_to_fill_the_device,padding_rows_with_the_whole_pool_in_use
cases="$cases gpu_executor_fused/fused_decode_on_every_arch"
[ -n "${CONVEYOR_EMU_TSAN_ALL:-}" ] && cases=gpu_executor,gpu_executor_cases,gpu_executor_archs,gpu_executor_fused,gpu_pipeline
suite blocks $kernels $cases
