#!/usr/bin/env bash
# Builds tools/llama_detokenize.cpp (llama.cpp's detokenizer as a command, for
# tools/make_vocab_goldens.py) against the static libraries tools/build_llama_cpp.sh leaves in its
# build directory, and prints the binary's path. Idempotent: rebuilds only when the source is newer.
#
#   tools/build_llama_detokenize.sh     # -> ${CONVEYOR_CACHE:-~/.cache/conveyor}/llama.cpp-0.3.36/bin/llama-detokenize
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

say() { echo "[build_llama_detokenize] $*" >&2; }
die() { echo "[build_llama_detokenize] error: $*" >&2; exit 1; }

bin=$("$here/build_llama_cpp.sh") || die "tools/build_llama_cpp.sh failed"
root=$(dirname "$bin")
src=$root/src
build=$root/build
out=$bin/llama-detokenize
main=$here/llama_detokenize.cpp
if [[ -x $out && $out -nt $main && $out -nt $build/src/libllama.a ]]; then
  echo "$out"
  exit 0
fi

libs=()
for lib in src/libllama.a ggml/src/libggml.a ggml/src/libggml-cpu.a ggml/src/libggml-base.a; do
  [[ -f $build/$lib ]] || die "$build/$lib missing. HINT: rm -rf $bin and re-run tools/build_llama_cpp.sh"
  libs+=("$build/$lib")
done
flags=()
grep -q '^GGML_OPENMP_ENABLED:INTERNAL=ON' "$build/CMakeCache.txt" && flags+=(-fopenmp)
say "compiling $main"
nice -n "${NICE:-10}" c++ -std=c++17 -O1 "$main" -I "$src/include" -I "$src/ggml/include" "${libs[@]}" \
  "${flags[@]}" -lpthread -ldl -o "$out.tmp" >&2
mv -f "$out.tmp" "$out"
echo "$out"
