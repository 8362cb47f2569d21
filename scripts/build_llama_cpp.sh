#!/usr/bin/env bash
# Builds llama.cpp from source for scripts/bench_cpu_vs_llamacpp.py and scripts/bench_spec.py
# (llama-lookup): the copy vendored in the llama-cpp-python 0.3.36 source distribution on PyPI (the
# only pinned, reachable source we have).
# CPU only (Release, -march=native, no curl, no GPU backends). Idempotent: skips work already done.
#
#   scripts/build_llama_cpp.sh            # -> ${CONVEYOR_CACHE:-~/.cache/conveyor}/llama.cpp-0.3.36/bin
#   JOBS=2 NICE=10 scripts/build_llama_cpp.sh
set -euo pipefail

version=0.3.36
cache=${CONVEYOR_CACHE:-$HOME/.cache/conveyor}
# ISA=avx2: a second build, in llama.cpp-$version-avx2, with AVX2/FMA/F16C and nothing newer (no
# AVX-512, no AVX-VNNI): llama.cpp as it runs on an AVX2-only host, for the AVX2 table of
# docs/benchmarks.md on a host that has more (conveyor's side: CONVEYOR_ISA=avx2).
isa=${ISA:-native}
case $isa in
  native) root=$cache/llama.cpp-$version ;;
  avx2) root=$cache/llama.cpp-$version-avx2 ;;
  *) echo "[build_llama_cpp] error: ISA must be native or avx2, not '$isa'" >&2; exit 2 ;;
esac
build=$root/build
bin=$root/bin
jobs=${JOBS:-2}
nice_level=${NICE:-10}
targets=(llama-bench llama-batched-bench llama-server llama-cli llama-simple llama-quantize llama-tokenize
         llama-lookup)
# No AMX: -march=native turns on ggml's AMX kernels wherever CPUID lists AMX, but many VMs list it
# without enabling its register state, and those kernels then die of SIGILL (seen on a Xeon VM
# here: llama-server crashed in tinygemm_kernel_amx). conveyor's kernels use no AMX either, so the
# comparison stays AVX-512 against AVX-512. Bump `recipe` when flags change (forces a rebuild).
cflags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
isa_flags=(-DGGML_NATIVE=ON)
if [[ $isa == avx2 ]]; then
  isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
             -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF)
fi
recipe="r2 $cflags"
[[ $isa == avx2 ]] && recipe+=" avx2"

say() { echo "[build_llama_cpp] $*" >&2; }
die() { echo "[build_llama_cpp] error: $*" >&2; exit 1; }

# $bin/BUILT lists the targets the last build produced (a version may lack some of ours).
all_built() {
  local t
  [[ -f $bin/BUILT ]] || return 1
  [[ $(cat "$bin/REQUESTED" 2>/dev/null) == "${targets[*]}" ]] || return 1  # a target was added
  [[ $(cat "$bin/RECIPE" 2>/dev/null) == "$recipe" ]] || return 1             # the flags changed
  for t in $(cat "$bin/BUILT"); do [[ -x $bin/$t ]] || return 1; done
}

if all_built; then
  say "already built: $bin"
  echo "$bin"
  exit 0
fi

for tool in cmake c++ cc; do
  command -v "$tool" >/dev/null || die "'$tool' not found. HINT: apt-get install cmake g++ (or build-essential)"
done
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
src=$(PYTHON=${PYTHON:-} "$(dirname "$0")/fetch_llama_src.sh") || die "could not fetch the llama.cpp source"
for d in tools/server tools/llama-bench tools/batched-bench tools/quantize; do
  [[ -d $src/$d ]] || die "$src/$d missing: the vendored llama.cpp lacks a tool we need"
done

say "configuring in $build"
nice -n "$nice_level" cmake -S "$src" -B "$build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release "${isa_flags[@]}" -DLLAMA_CURL=OFF \
  -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DBUILD_SHARED_LIBS=OFF -DCMAKE_C_FLAGS="$cflags" -DCMAKE_CXX_FLAGS="$cflags" >&2

start=$(date +%s)
# Targets missing from this llama.cpp version (llama-cli/llama-simple move around) are skipped.
present=()
for t in "${targets[@]}"; do
  if cmake --build "$build" --target help 2>/dev/null | grep -qE "(^|[ :])$t(:|$| )"; then
    present+=("$t")
  else
    say "target $t not in this llama.cpp; skipping"
  fi
done
say "building ${present[*]} with -j$jobs under nice $nice_level (takes a while on few cores)"
nice -n "$nice_level" cmake --build "$build" -j "$jobs" --target "${present[@]}" >&2
mkdir -p "$bin"
for t in "${present[@]}"; do
  cp -f "$build/bin/$t" "$bin/$t"
done
echo "${present[*]}" > "$bin/BUILT"
echo "${targets[*]}" > "$bin/REQUESTED"
echo "$recipe" > "$bin/RECIPE"
all_built || die "build finished but binaries are missing from $bin"
say "built in $(( $(date +%s) - start )) s; binaries in $bin"
echo "$bin"
