#!/usr/bin/env bash
# Builds tools/llama_ref/llama_logits against the llama.cpp that tools/build_llama_cpp.sh built
# (static libraries, CPU only). Prints the binary's path. Only the golden generators need it;
# tests compare against the goldens it produced.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin_dir=$("$here/../build_llama_cpp.sh")
root=$(dirname "$bin_dir")
src=$root/src build=$root/build out=$root/bin/llama_logits
if [[ ! -x $out || $here/llama_logits.cpp -nt $out ]]; then
  libs=("$build/src/libllama.a" "$build/ggml/src/libggml.a" "$build/ggml/src/libggml-cpu.a" "$build/ggml/src/libggml-base.a")
  for l in "${libs[@]}"; do [[ -f $l ]] || { echo "missing $l; rerun tools/build_llama_cpp.sh" >&2; exit 1; }; done
  c++ -O2 -std=c++17 -I"$src/include" -I"$src/ggml/include" "$here/llama_logits.cpp" -o "$out" \
    -Wl,--start-group "${libs[@]}" -Wl,--end-group -fopenmp -lpthread -ldl -lm
fi
echo "$out"
