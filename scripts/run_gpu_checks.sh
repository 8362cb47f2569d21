#!/usr/bin/env bash
# Every GPU check of conveyor in one command (docs/gpu.md, "Verification"): the gpu_tests tier
# (kernels and the CUDA executor against CPU references), `conveyor gpu-bench` (decode step time
# at batch 1/8/64/256 vs the memory-bandwidth floor, prefill TFLOP/s vs the cuBLASLt ceiling, the
# Anyscale workload with continuous and static batching) and the Hugging Face transformers
# baseline on the same requests (scripts/hf_gpu_baseline.py). Logs and JSON go to $OUT when set
# (the device tool's result folder), else ./build-gpu-results (ignored); a summary is printed last.
# Between the tests and the bench, compute-sanitizer runs the kernel suites under memcheck (with
# leak check), racecheck (shared-memory hazards) and synccheck (barriers in divergent code);
# --sanitize-all adds the executor suites (CUDA graphs included; much slower).
#
#   scripts/run_gpu_checks.sh                  build here with CUDA (needs conveyor's build
#                                            dependencies, setup.sh's list) and run everything
#   scripts/run_gpu_checks.sh --bundle DIR     on the build machine (no GPU needed): build, then
#                                            pack conveyor, gpu_tests and their non-system
#                                            shared libraries into DIR/bundle.tar.xz
#   scripts/run_gpu_checks.sh --prebuilt DIR   on a GPU machine without the build dependencies
#                                            (the lent H100: CUDA 13 but no Boost/CAF/ZeroMQ):
#                                            unpack DIR/bundle.tar.xz and run everything
#   scripts/run_gpu_checks.sh --stage-model DIR  copy SmolLM2 parts (split -b 45M) from DIR to
#                                            /tmp/conveyor-models and join them when all are there
# Options: --quick (fewer steps and requests), --no-hf (skip the transformers baseline),
#          --no-profile (skip the Nsight Compute profile of the decode steps),
#          --no-sanitize (skip compute-sanitizer), --sanitize-all (every suite under it).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=build DIR= QUICK=0 HF=1 SAN=kernels PROFILE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) MODE=bundle DIR=$2; shift ;;
    --prebuilt) MODE=prebuilt DIR=$2; shift ;;
    --stage-model) MODE=stage DIR=$2; shift ;;
    --quick) QUICK=1 ;;
    --no-hf) HF=0 ;;
    --no-profile) PROFILE=0 ;;
    --no-sanitize) SAN=none ;;
    --sanitize-all) SAN=all ;;
    *) echo "run_gpu_checks.sh: unknown argument '$1' (see the header of this file)" >&2; exit 2 ;;
  esac
  shift
done
MODEL_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_DIR=/tmp/conveyor-models

if [ "$MODE" = stage ]; then
  mkdir -p "$MODEL_DIR/parts" && cp "$DIR"/$MODEL_NAME.part* "$MODEL_DIR/parts/" || exit 1
  want=$(python3 -c "import json;print(json.load(open('tests/data/smollm2_greedy.json'))['model_sha256'])")
  cat "$MODEL_DIR"/parts/$MODEL_NAME.part* > "$MODEL_DIR/$MODEL_NAME.tmp"
  if [ "$(sha256sum "$MODEL_DIR/$MODEL_NAME.tmp" | cut -d' ' -f1)" = "$want" ]; then
    mv "$MODEL_DIR/$MODEL_NAME.tmp" "$MODEL_DIR/$MODEL_NAME" && echo "SmolLM2 staged at $MODEL_DIR"
  else
    rm -f "$MODEL_DIR/$MODEL_NAME.tmp" && echo "SmolLM2: $(ls "$MODEL_DIR/parts" | wc -l) part(s) staged, waiting for the rest"
  fi
  exit 0
fi

if [ "$MODE" = bundle ] || [ "$MODE" = build ]; then
  BUILD=${CONVEYOR_GPU_BUILD_DIR:-build-gpu-check}
  ARCHS=$([ "$MODE" = bundle ] && echo "80;90" || echo 90)
  JOBS=$([ "$MODE" = bundle ] && echo 2 || nproc)
  cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=$ARCHS" >/dev/null || exit 1
  cmake --build $BUILD -j"$JOBS" --target conveyor gpu_tests || exit 1
  CONVEYOR=$ROOT/$BUILD/conveyor TESTS=$ROOT/$BUILD/tests/gpu_tests
  if [ "$MODE" = bundle ]; then
    stage=$(mktemp -d) && mkdir -p "$stage/bin" "$stage/lib"
    PLUGIN=$(dirname "$CONVEYOR")/libconveyor_cuda.so  # conveyor loads it beside itself for --device cuda
    cp "$CONVEYOR" "$PLUGIN" "$TESTS" "$stage/bin/"
    git log --oneline -1 > "$stage/commit.txt"; git status --short | sed 's/^/  uncommitted: /' >> "$stage/commit.txt"
    # Every shared library but the C runtime, the C++ runtime and CUDA's own (the GPU machine has those).
    ldd "$CONVEYOR" "$PLUGIN" "$TESTS" | awk '/=> \//{print $3}' | sort -u |
      grep -v -E '/(libc|libm|libpthread|libdl|librt|libresolv|libgcc_s|libstdc\+\+|ld-linux[^/]*|libcuda|libcudart|libcublas|libcublasLt)\.so' |
      xargs -r -I{} cp -L {} "$stage/lib/"
    mkdir -p "$DIR" && tar -cJf "$DIR/bundle.tar.xz" -C "$stage" bin lib commit.txt && rm -rf "$stage"
    echo "bundle: $DIR/bundle.tar.xz ($(du -h "$DIR/bundle.tar.xz" | cut -f1)); on the GPU machine: scripts/run_gpu_checks.sh --prebuilt $DIR"
    exit 0
  fi
else
  unpack=/tmp/conveyor-gpu-bundle
  rm -rf $unpack && mkdir -p $unpack && tar -xJf "$DIR/bundle.tar.xz" -C $unpack || exit 1
  export LD_LIBRARY_PATH=$unpack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  CONVEYOR=$unpack/bin/conveyor TESTS=$unpack/bin/gpu_tests
fi

# The device tool returns at most 8 files from $OUT: work in a folder of our own, hand back the
# archive and the summary.
RES=$ROOT/build-gpu-results
[ -n "${OUT:-}" ] && RES=/tmp/conveyor-gpu-results
rm -rf "$RES" && mkdir -p "$RES"
# Stage limits (seconds): the quick pass fits about 4 minutes of GPU time.
T_SAN=$([ "$QUICK" = 1 ] && echo 150 || echo 900)
T_HF=$([ "$QUICK" = 1 ] && echo 120 || echo 1800)
export CONVEYOR_TEST_DATA=$ROOT/tests/data
[ -f "$MODEL_DIR/$MODEL_NAME" ] && export CONVEYOR_CACHE=$MODEL_DIR
{ nvidia-smi 2>&1 | head -20; cat "${unpack:-/nonexistent}/commit.txt" 2>/dev/null || git log --oneline -1 2>/dev/null; } > "$RES/machine.txt"

echo "== gpu_tests"
"$TESTS" --color_output=no --log_level=message --report_level=short 2>&1 | tee "$RES/gpu_tests.log"
rc_tests=${PIPESTATUS[0]}

echo "== conveyor gpu-bench"
bench_args=()
[ "$QUICK" = 1 ] && bench_args=(--steps 8 --anyscale-prompts 256)
"$CONVEYOR" gpu-bench "${bench_args[@]}" --json "$RES/gpu_bench.json" --workload-json /tmp/conveyor-anyscale.json 2>&1 |
  tee "$RES/gpu_bench.log"
rc_bench=${PIPESTATUS[0]}


# Nsight Compute: kernel durations and DRAM bytes of the batch-1 context fill and decode steps
# (every kernel), and of the attention kernel alone at batch 64 (docs/gpu.md §8: the profile that
# says where a step's time goes); scripts/ncu_summary.py makes the tables.
rc_prof=skipped
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
if [ "$PROFILE" = 1 ] && [ -x "$NCU" ]; then
  echo "== Nsight Compute profile"
  metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
  timeout 120 "$NCU" --clock-control none --csv --page raw --metrics $metrics -k 'regex:^(?!fill)' --launch-count 1500 \
    --log-file "$RES/ncu_batch1.csv" "$CONVEYOR" gpu-bench --batches 1 --steps 2 --gemm-size 1024 --anyscale-prompts 0 --no-verify \
    > "$RES/ncu_batch1.log" 2>&1
  rc_prof=$?
  timeout 120 "$NCU" --clock-control none --csv --page raw --metrics $metrics -k 'regex:paged_attention_(tiled|combine)' \
    --launch-count 128 --log-file "$RES/ncu_batch64_attention.csv" "$CONVEYOR" gpu-bench --batches 64 --steps 2 \
    --gemm-size 1024 --anyscale-prompts 0 --no-verify > "$RES/ncu_batch64.log" 2>&1
  rc_prof="$rc_prof $?"
  python3 scripts/ncu_summary.py "$RES/ncu_batch1.csv" --steps 3 > "$RES/ncu_summary.txt" 2>&1
  python3 scripts/ncu_summary.py "$RES/ncu_batch64_attention.csv" --steps 1 >> "$RES/ncu_summary.txt" 2>&1
  head -40 "$RES/ncu_summary.txt"
fi

# `conveyor serve --device cuda` with SmolLM2, loaded by `conveyor bench` at 1, 32 and 256 jobs in
# flight (512-token prompts, 128 output tokens).
rc_serve=skipped
if [ -f "$MODEL_DIR/$MODEL_NAME" ]; then
  echo "== conveyor serve --device cuda + conveyor bench"
  "$CONVEYOR" serve --device cuda --model "$MODEL_DIR/$MODEL_NAME" --router tcp://127.0.0.1:5755 \
    --pub tcp://127.0.0.1:5756 --max-num-seqs 256 > "$RES/serve.log" 2>&1 &
  serve_pid=$!
  sleep 3
  rc_serve=0
  for c in 1 32 256; do
    kill -0 $serve_pid 2>/dev/null || { echo "serve is not running:"; tail -5 "$RES/serve.log"; rc_serve="$rc_serve died"; break; }
    n=$((c == 1 ? 8 : 2 * c))
    timeout 120 "$CONVEYOR" bench --router tcp://127.0.0.1:5755 --pub tcp://127.0.0.1:5756 --workload random \
      --input-len 512 --output-len 128 --num-prompts $n --max-concurrency $c --connect-timeout 60 \
      --no-progress --json "$RES/serve_bench_c$c.json" > "$RES/serve_bench_c$c.log" 2>&1
    rc=$?
    echo "concurrency $c: exit $rc" && grep -E "throughput|TTFT|ITL|TPOT" "$RES/serve_bench_c$c.log" | head -8
    [ $rc != 0 ] && rc_serve="$rc_serve c$c:$rc"
  done
  kill -INT $serve_pid 2>/dev/null
  for _ in $(seq 20); do kill -0 $serve_pid 2>/dev/null || break; sleep 0.5; done
  kill -9 $serve_pid 2>/dev/null
  wait $serve_pid; echo "serve exit $?"; tail -5 "$RES/serve.log"
fi

# compute-sanitizer: each tool's log in $RES; its exit code 9 means it reported errors.
san_suites=gpu_kernels,gpu_attention_sampling,gpu_attention_wmma,gpu_arena
[ "$SAN" = all ] && san_suites=$san_suites,gpu_executor,gpu_executor_cases,gpu_executor_archs,gpu_executor_fused,gpu_pipeline
SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
rc_san=skipped
if [ "$SAN" != none ]; then
  if [ -x "$SANITIZER" ]; then
    rc_san=0
    for tool in memcheck racecheck synccheck; do
      echo "== compute-sanitizer --tool $tool ($san_suites)"
      extra=()
      [ "$tool" = memcheck ] && extra=(--leak-check full)
      timeout "$T_SAN" "$SANITIZER" --tool $tool "${extra[@]}" --error-exitcode 9 "$TESTS" --run_test=$san_suites --color_output=no \
        --log_level=warning --report_level=short > "$RES/sanitizer_$tool.log" 2>&1
      rc=$?
      tail -3 "$RES/sanitizer_$tool.log"
      echo "compute-sanitizer $tool: exit $rc"
      [ $rc != 0 ] && rc_san="$rc_san $tool:$rc"
    done
  else
    echo "== compute-sanitizer not found (looked on PATH and in /usr/local/cuda/bin): skipped"
    rc_san=missing
  fi
fi

rc_hf=skipped
if [ "$HF" = 1 ] && [ -f /tmp/conveyor-anyscale.json ]; then
  echo "== Hugging Face transformers baseline"
  hf_args=()
  [ "$QUICK" = 1 ] && hf_args=(--limit 256)
  PYTHONUNBUFFERED=1 timeout "$T_HF" python3 scripts/hf_gpu_baseline.py --workload /tmp/conveyor-anyscale.json "${hf_args[@]}" \
    --json "$RES/hf_baseline.json" 2>&1 | tee "$RES/hf_baseline.log"
  rc_hf=${PIPESTATUS[0]}
fi

{
echo "== summary (results in $RES)"
cat "$RES/machine.txt"
grep -E "test cases|failed|passed|diverges|worst relative|equal to the CPU|sampled rows" "$RES/gpu_tests.log" | head -20
grep -E "^(device|copy|batch|[0-9]|prefill|anyscale|verification)" "$RES/gpu_bench.log"
[ -f "$RES/hf_baseline.log" ] && grep -E "^hf " "$RES/hf_baseline.log"
for tool in memcheck racecheck synccheck; do
  [ -f "$RES/sanitizer_$tool.log" ] && echo "sanitizer $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY' "$RES/sanitizer_$tool.log" | tr '\n' ' ')"
done
grep -hE "^(Output token throughput|Mean TTFT|Median ITL|Mean ITL|P99 ITL)" "$RES"/serve_bench_c*.log 2>/dev/null
[ -f "$RES/ncu_summary.txt" ] && grep -E "^step" "$RES/ncu_summary.txt"
echo "exit codes: gpu_tests $rc_tests, compute-sanitizer $rc_san, gpu-bench $rc_bench, profile $rc_prof, serve+bench $rc_serve, hf $rc_hf"
} 2>&1 | tee "$RES/summary.txt"
tar -czf /tmp/conveyor-gpu-results.tgz -C "$RES" . && mv /tmp/conveyor-gpu-results.tgz "$RES/" &&
  results=$RES/conveyor-gpu-results.tgz
[ -n "${OUT:-}" ] && [ -n "${results:-}" ] && cp "$results" "$RES/summary.txt" "$OUT/" && results=$OUT/conveyor-gpu-results.tgz
echo
echo "Please send back: ${results:-the folder $RES} (machine.txt: GPU and commit; gpu_tests.log; sanitizer_*.log;"
echo "gpu_bench.json and .log; hf_baseline.json when run) by attaching it to an issue, with the summary above."
[ "$rc_tests" = 0 ] && [ "$rc_bench" = 0 ] && { [ "$rc_san" = 0 ] || [ "$rc_san" = skipped ]; }
