# Sourced by scripts/build_xgrammar.sh and scripts/build_jinja.sh (not run on its own): a fresh build
# directory $work and log $log, removed on exit unless a step failed; fail_build "why", which
# keeps them, prints the log's tail and dies (the caller defines die); and configure_static, the
# cmake configure step both builds share (the caller sets prefix and nice_level).
#
#   begin_workdir "$work" "$log"
#   configure_static "$src" "$build" "-fmacro-prefix-map=$src/=" -DSOME_OPTION=OFF
begin_workdir() {
  work=$1 log=$2
  rm -rf "$work" && mkdir -p "$work"
  : >"$log"
  keep_work=0
  trap 'if [[ $keep_work == 0 ]]; then rm -rf "$work"; fi' EXIT
}

fail_build() {
  keep_work=1
  echo "----- last 40 lines of $log -----" >&2
  tail -n 40 "$log" >&2 || true
  echo "---------------------------------" >&2
  die "$1 (full log: $log)"
}

# configure_static SOURCE BUILD CXXFLAGS [CMAKE_ARG...]: a Release build of static, position
# independent code to install into $prefix, with ninja and ccache where they are present; the
# output goes to $log, a failure to fail_build.
configure_static() {
  local source=$1 build=$2 cxxflags=$3
  shift 3
  local generator=() launcher=()
  if command -v ninja >/dev/null; then generator=(-G Ninja); fi
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER="$(command -v ccache)"); fi
  nice -n "$nice_level" cmake -S "$source" -B "$build" "${generator[@]}" "${launcher[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DCMAKE_CXX_FLAGS="$cxxflags" \
    -DCMAKE_INSTALL_PREFIX="$prefix" \
    "$@" >"$log" 2>&1 || fail_build "cmake configure failed"
}
