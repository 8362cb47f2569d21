# Sourced by scripts/build_xgrammar.sh and scripts/build_jinja.sh (not run on its own): a fresh build
# directory $work and log $log, removed on exit unless a step failed, and fail_build "why", which
# keeps them, prints the log's tail and dies (the caller defines die).
#
#   begin_workdir "$work" "$log"
#   cmake ... >"$log" 2>&1 || fail_build "cmake configure failed"
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
