#!/usr/bin/env bash
# Builds the libFuzzer target tests/fuzz/fuzz_decode with clang++ (its own CMake project: see
# tests/fuzz/CMakeLists.txt for why) and runs it over the seed corpus, then prints a summary:
# executions, exec/s, crashes, corpus size, coverage, time, and the command line.
# Exits 1 when libFuzzer found a crash (the input is saved under <build>/artifacts/), 2 on a setup
# problem (clang or its libFuzzer runtime missing, build failure).
#
#   scripts/run_fuzz.sh [--runs N] [--jobs J] [--max-time S] [--build DIR] [--fresh]
#     --runs N      executions in all, split evenly over the jobs (default 10000000)
#     --jobs J      fuzzing processes in parallel (libFuzzer -jobs=J -workers=J; default 2)
#     --max-time S  stop each process after S seconds even if its runs are not done (default: none)
#     --build DIR   where the fuzz build and its working corpus live (default build-fuzz/)
#     --fresh       start from the seeds alone (empty the working corpus first)
# The ctest entry `fuzz_decode` (label fuzz) runs it short: --runs 200000 --jobs 1 --max-time 60.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

runs=10000000 jobs=2 max_time=0 build="$root/build-fuzz" fresh=0
while (($#)); do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --max-time) max_time=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --fresh) fresh=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "run_fuzz.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "run_fuzz.sh: $*" >&2; exit 2; }

# clang and libFuzzer's runtime: a missing one is an error, never a silent pass.
command -v clang++ >/dev/null ||
  die "clang++ not found; the fuzz target needs clang and libFuzzer: apt-get install clang libclang-rt-14-dev (setup.sh installs them)"
rt=$(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a)
[ -f "$rt" ] || rt=$(find "$(clang++ -print-resource-dir)" -name 'libclang_rt.fuzzer*.a' 2>/dev/null | head -n 1)
[ -n "$rt" ] && [ -f "$rt" ] ||
  die "clang's libFuzzer runtime (libclang_rt.fuzzer) not found: apt-get install libclang-rt-14-dev (setup.sh installs it)"

mkdir -p "$build"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root/tests/fuzz" -B "$build" -DCMAKE_CXX_COMPILER=clang++ >"$build/configure.log" 2>&1 ||
    { tail -n 30 "$build/configure.log" >&2; die "configuring the fuzz build failed (log: $build/configure.log)"; }
fi
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >"$build/build.log" 2>&1 ||
  { tail -n 40 "$build/build.log" >&2; die "building the fuzz target failed (log: $build/build.log)"; }

seeds="$root/tests/fuzz/corpus/decode"
work="$build/corpus-decode"        # what libFuzzer adds; the committed seeds are never written to
artifacts="$build/artifacts"
logs="$build/logs"
[ "$fresh" = 1 ] && rm -rf "$work"
rm -rf "$logs"
mkdir -p "$work" "$artifacts" "$logs"
before=$(find "$artifacts" -type f | wc -l)

per_job=$(((runs + jobs - 1) / jobs))
args=(-runs="$per_job" -dict="$root/tests/fuzz/decode.dict" -timeout=10 -print_final_stats=1
      -artifact_prefix="$artifacts/")
[ "$max_time" != 0 ] && args+=(-max_total_time="$max_time")
if [ "$jobs" -gt 1 ]; then
  args+=(-jobs="$jobs" -workers="$jobs")
fi
cmd=("$build/fuzz_decode" "${args[@]}" "$work" "$seeds")

start=$(date +%s)
status=0
# With -jobs, libFuzzer writes each process's output to fuzz-<n>.log in its working directory.
(cd "$logs" && "${cmd[@]}" >"$logs/fuzz.log" 2>&1) || status=$?
elapsed=$(($(date +%s) - start))

# Executions: each process prints "stat::number_of_executed_units: N" when it ends. With -jobs,
# the parent's fuzz.log repeats every job's log, so only the jobs' own logs count.
job_logs=("$logs/fuzz.log")
[ "$jobs" -gt 1 ] && job_logs=("$logs"/fuzz-*.log)
executed=$(cat "${job_logs[@]}" | awk '/stat::number_of_executed_units:/ {n += $2} END {print n + 0}')
crashes=$(($(find "$artifacts" -type f | wc -l) - before))
# Coverage of the whole working corpus, as libFuzzer counts it: one pass, no mutation.
cov=$("$build/fuzz_decode" -runs=0 "$work" "$seeds" 2>&1 | grep -m1 -oE 'cov: [0-9]+ ft: [0-9]+ corp: [^ ]+') || true

echo "fuzz_decode: $executed executions in ${elapsed}s ($((executed / (elapsed > 0 ? elapsed : 1))) exec/s), $jobs process(es)"
echo "  crashes: $crashes (libFuzzer exit status $status)"
echo "  corpus: $(find "$work" -type f | wc -l) inputs found + $(find "$seeds" -type f | wc -l) seeds"
echo "  coverage: ${cov:-unknown}"
echo "  command: (cd $logs && ${cmd[*]})"
if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
  echo "run_fuzz.sh: libFuzzer found a problem; its report:" >&2
  grep -h -E 'fuzz invariant violated|^  check: |^  at |==ERROR|runtime error|SUMMARY|Test unit written|^Base64' \
    "$logs"/*.log | head -n 40 >&2 || tail -n 40 "$logs"/*.log >&2
  echo "run_fuzz.sh: crashing inputs are in $artifacts/ (replay one: $build/fuzz_decode <file>)" >&2
  exit 1
fi
