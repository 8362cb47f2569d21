#!/usr/bin/env bash
# Two conveyor binaries side by side on the null-executor runtime benchmark (docs/benchmarks.md,
# "Runtime overhead"): 256 jobs x 8192 output tokens sent at once, each run on a fresh
# --state-dir (the journal on, as by default), in ABBA order so drift hits both alike. Prints one
# line per run ("A|B tokens/s") and a summary (mean, median, min, max per binary).
#   scripts/bench_null_ab.sh ROUNDS NEW_BINARY OLD_BINARY [more serve flags]
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: $0 ROUNDS NEW_BINARY OLD_BINARY [serve flags...]" >&2; exit 2; }
rounds=$1; a=$2; b=$3; shift 3
bench_bin=$a  # one load generator for both
results=$(mktemp)
run() {
  local label=$1 bin=$2; shift 2
  local sd; sd=$(mktemp -d)
  "$bin" serve --device null --num-kv-blocks 140000 --router tcp://127.0.0.1:5755 --pub tcp://127.0.0.1:5756 \
    --pull tcp://127.0.0.1:5757 --state-dir "$sd" "$@" > "$sd/serve.log" 2>&1 &
  local pid=$!
  sleep 2.5
  "$bench_bin" bench --router tcp://127.0.0.1:5755 --pub tcp://127.0.0.1:5756 --workload random --input-len 32 \
    --output-len 8192 --num-prompts 256 --request-rate inf --json "$sd/out.json" > /dev/null 2>&1
  kill -TERM "$pid"; wait "$pid" || true
  local tps; tps=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['output_throughput']))" "$sd/out.json")
  echo "$label $tps" | tee -a "$results"
  rm -rf "$sd"
}
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then run A "$a" "$@"; run B "$b" "$@"; else run B "$b" "$@"; run A "$a" "$@"; fi
done
python3 - "$results" "$a" "$b" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    runs.setdefault(k, []).append(int(v))
print("| binary | runs | mean | median | min | max |")
print("|---|---|---|---|---|---|")
for k, name in (("A", sys.argv[2]), ("B", sys.argv[3])):
    v = runs.get(k, [])
    if v:
        print(f"| {name} | {len(v)} | {statistics.mean(v):,.0f} | {statistics.median(v):,.0f} | {min(v):,} | {max(v):,} |")
PY
rm -f "$results"
