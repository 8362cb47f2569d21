# Sourced by scripts/gpu_emu_asan.sh and scripts/gpu_emu_tsan.sh: configures a sub-build of this
# tree without CUDA (the emulated GPU tier only) and builds gpu_emu_tests there (ccache, nice).
#   emu_subbuild NAME SOURCE_DIR SUB_BUILD_DIR "WHAT" CMAKE_ARG...
emu_subbuild() {
  local name=$1 src=$2 bin=$3 what=$4
  shift 4
  mkdir -p "$bin"
  export CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=1
  echo "$name: configuring $bin ($what, no CUDA)"
  if ! cmake -S "$src" -B "$bin" -DCMAKE_BUILD_TYPE=Release -DCONVEYOR_CUDA=OFF "$@" >"$bin/configure.log" 2>&1; then
    tail -30 "$bin/configure.log"
    echo "$name: configure failed (log: $bin/configure.log)" >&2
    exit 1
  fi
  echo "$name: building gpu_emu_tests with $what (first time: several minutes)"
  if ! nice cmake --build "$bin" --target gpu_emu_tests -j "$(nproc)" >"$bin/build.log" 2>&1; then
    grep -E "error|Error" "$bin/build.log" | head -30
    echo "$name: build failed (log: $bin/build.log)" >&2
    exit 1
  fi
}
