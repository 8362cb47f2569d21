#!/usr/bin/env bash
# Builds one of the programs in scripts/llama_ref/ (llama.cpp itself as a reference, for the golden
# generators) against the static libraries scripts/build_llama_cpp.sh leaves in its build directory
# (CPU only), and prints the binary's path. Rebuilds only when the source or llama.cpp is newer.
# Only the golden generators need these; the tests compare against the goldens they produced.
#
#   scripts/llama_ref/build.sh [llama_logits|llama_detokenize]    # default llama_logits
#     llama_logits      scripts/make_arch_goldens.py: prompt logits and greedy steps
#     llama_detokenize  scripts/make_vocab_goldens.py: llama.cpp's detokenizer as a command
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prog=${1:-llama_logits}
main=$here/$prog.cpp

say() { echo "[llama_ref] $*" >&2; }
die() { echo "[llama_ref] error: $*" >&2; exit 1; }

[[ -f $main ]] || die "no $main (programs: $(cd "$here" && ls *.cpp | sed 's/\.cpp//' | tr '\n' ' '))"
bin=$("$here/../build_llama_cpp.sh") || die "scripts/build_llama_cpp.sh failed"
root=$(dirname "$bin")
src=$root/src build=$root/build out=$bin/$prog
if [[ -x $out && $out -nt $main && $out -nt $build/src/libllama.a ]]; then
  echo "$out"
  exit 0
fi
libs=()
for lib in src/libllama.a ggml/src/libggml.a ggml/src/libggml-cpu.a ggml/src/libggml-base.a; do
  [[ -f $build/$lib ]] || die "$build/$lib missing. HINT: rm -rf $bin and re-run scripts/build_llama_cpp.sh"
  libs+=("$build/$lib")
done
flags=()
grep -q '^GGML_OPENMP_ENABLED:INTERNAL=ON' "$build/CMakeCache.txt" && flags+=(-fopenmp)
say "compiling $main"
nice -n "${NICE:-10}" c++ -std=c++17 -O2 "$main" -I "$src/include" -I "$src/ggml/include" \
  -Wl,--start-group "${libs[@]}" -Wl,--end-group "${flags[@]}" -lpthread -ldl -lm -o "$out.tmp" >&2
mv -f "$out.tmp" "$out"
echo "$out"
