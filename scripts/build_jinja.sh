#!/usr/bin/env bash
# Builds llama.cpp's Jinja engine (common/jinja/*, MIT) as a static library from the pinned
# llama.cpp source that scripts/fetch_llama_src.sh unpacks, and installs it into a prefix:
#
#   <prefix>/include/llama-jinja/jinja/*.h      the engine (#include "llama-jinja/jinja/runtime.h")
#   <prefix>/include/llama-jinja/{json,unicode}.h  common_json (the engine's input type) and unicode
#   <prefix>/lib/libllama-jinja.a               static library (Release, -fPIC)
#   <prefix>/share/doc/llama-jinja/LICENSE      llama.cpp's MIT license
#   <prefix>/share/llama-jinja/templates/       llama.cpp's models/templates/*.jinja (real models'
#                                               templates; the unit tests render them)
#   <prefix>/.llama-jinja-stamp                 "<version> <sha256> <recipe>": written last
#
# Consumed by cmake/FindLlamaJinja.cmake (find_package(LlamaJinja) -> target LlamaJinja::jinja).
# Debian 12 packages no C++ Jinja engine, so conveyor builds the one llama.cpp's server renders
# chat templates with (docs/architecture.md, "Chat templates").
#
#   scripts/build_jinja.sh                     # -> /usr/local/llama-jinja (needs root)
#   scripts/build_jinja.sh /opt/llama-jinja    # or LLAMA_JINJA_PREFIX=/opt/llama-jinja
#   JOBS=2 NICE=10 scripts/build_jinja.sh
#
# Idempotent: exits at once when the stamp says this version and recipe are installed; set
# LLAMA_JINJA_FORCE=1 to rebuild anyway. Sources compiled: common/jinja/*.cpp, common/json.cpp
# (includes "ggml.h" only for GGML_ASSERT: a shim header in the build directory provides it; the
# sources are not edited), common/unicode.cpp.
# Debian 12 packages needed (setup.sh installs them): cmake g++ nlohmann-json3-dev, plus what
# scripts/fetch_llama_src.sh needs (python3 with pip, tar, sha256sum), util-linux (flock).
# Optional: ccache (compiler launcher), ninja-build (generator). Network: PyPI, on first fetch.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Pinned by scripts/fetch_llama_src.sh: llama.cpp as vendored in llama-cpp-python's sdist.
version=$(sed -n 's/^version=//p' "$here/fetch_llama_src.sh")
sha256=$(sed -n 's/^sha256=//p' "$here/fetch_llama_src.sh")
recipe=r1  # bump when the file list or flags below change
prefix=${1:-${LLAMA_JINJA_PREFIX:-/usr/local/llama-jinja}}
jobs=${JOBS:-2}
nice_level=${NICE:-10}
cache=${CONVEYOR_CACHE:-${HOME:-/root}/.cache/conveyor}
want_stamp="$version $sha256 $recipe"

say() { echo "llama-jinja: $*" >&2; }
die() { echo "llama-jinja: error: $*" >&2; exit 1; }

[[ -n $version && -n $sha256 ]] || die "cannot read the pinned version from $here/fetch_llama_src.sh"
[[ $prefix == /* ]] || prefix=$(pwd)/$prefix
stamp=$prefix/.llama-jinja-stamp
installed() {
  [[ -f $stamp && "$(cat "$stamp")" == "$want_stamp" && -f $prefix/lib/libllama-jinja.a \
     && -f $prefix/include/llama-jinja/jinja/runtime.h && -f $prefix/include/llama-jinja/json.h \
     && -d $prefix/share/llama-jinja/templates ]]
}
if [[ ${LLAMA_JINJA_FORCE:-0} != 1 ]] && installed; then
  say "llama.cpp $version jinja already installed in $prefix (stamp $stamp); nothing to do"
  exit 0
fi

# ---- prerequisites ---------------------------------------------------------------------------
for tool in cmake c++; do
  command -v "$tool" >/dev/null || die "'$tool' not found. HINT: apt-get install cmake g++"
done
[[ -f /usr/include/nlohmann/json.hpp ]] \
  || die "nlohmann/json.hpp not found. HINT: apt-get install nlohmann-json3-dev"
if ! mkdir -p "$prefix" 2>/dev/null || [[ ! -w $prefix ]]; then
  die "cannot write to prefix $prefix (run as root, or pass a writable prefix as \$1 / LLAMA_JINJA_PREFIX)"
fi
src=$("$here/fetch_llama_src.sh") || die "scripts/fetch_llama_src.sh failed (output above)"
common=$src/common
for f in jinja/runtime.h jinja/caps.cpp json.cpp json.h unicode.cpp unicode.h; do
  [[ -f $common/$f ]] || die "unexpected llama.cpp layout: no common/$f in $src"
done
[[ -d $src/models/templates ]] || die "unexpected llama.cpp layout: no models/templates in $src"

# ---- configure -------------------------------------------------------------------------------
# A fixed build directory: stable paths let ccache reuse objects across runs; a lock keeps
# concurrent runs apart.
mkdir -p "$cache"
work=$cache/llama-jinja-$version-build
log=$cache/llama-jinja-$version-build.log
exec 9>"$cache/llama-jinja-build.lock"
if command -v flock >/dev/null; then
  flock -n 9 || { say "another build_jinja.sh is running; waiting for it"; flock 9; }
  if [[ ${LLAMA_JINJA_FORCE:-0} != 1 ]] && installed; then
    say "installed into $prefix meanwhile; nothing to do"
    exit 0
  fi
fi
# shellcheck source=scripts/build_workdir.sh
source "$(dirname "$0")/build_workdir.sh"
begin_workdir "$work" "$log"
mkdir -p "$work/shim"

# json.cpp wants GGML_ASSERT from ggml.h (for nlohmann's JSON_ASSERT) and nothing else from ggml.
cat >"$work/shim/ggml.h" <<'EOF'
// Shim for llama.cpp's common/json.cpp, written by conveyor's scripts/build_jinja.sh.
#pragma once
#include <cstdio>
#include <cstdlib>
#define GGML_ASSERT(x) \
  do { \
    if (!(x)) { \
      std::fprintf(stderr, "%s:%d: GGML_ASSERT(%s) failed\n", __FILE__, __LINE__, #x); \
      std::abort(); \
    } \
  } while (0)
EOF
cat >"$work/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(llama_jinja CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
find_package(nlohmann_json 3.10 REQUIRED)
file(GLOB jinja_sources CONFIGURE_DEPENDS ${LLAMA_COMMON}/jinja/*.cpp)
add_library(llama-jinja STATIC ${jinja_sources} ${LLAMA_COMMON}/json.cpp ${LLAMA_COMMON}/unicode.cpp)
target_include_directories(llama-jinja PRIVATE ${LLAMA_COMMON} ${CMAKE_CURRENT_SOURCE_DIR}/shim)
target_link_libraries(llama-jinja PRIVATE nlohmann_json::nlohmann_json)
install(TARGETS llama-jinja ARCHIVE DESTINATION lib)
file(GLOB jinja_headers ${LLAMA_COMMON}/jinja/*.h)
install(FILES ${jinja_headers} DESTINATION include/llama-jinja/jinja)
install(FILES ${LLAMA_COMMON}/json.h ${LLAMA_COMMON}/unicode.h DESTINATION include/llama-jinja)
install(FILES ${LLAMA_ROOT}/LICENSE DESTINATION share/doc/llama-jinja)
file(GLOB templates ${LLAMA_ROOT}/models/templates/*.jinja)
install(FILES ${templates} DESTINATION share/llama-jinja/templates)
EOF

# -fmacro-prefix-map: no build-machine paths in __FILE__ (GGML_ASSERT messages).
say "configuring (Release, static, -fPIC; log: $log)"
configure_static "$work" "$work/build" "-fmacro-prefix-map=$src/=" -DLLAMA_COMMON="$common" -DLLAMA_ROOT="$src"

# ---- build + install -------------------------------------------------------------------------
say "building (about 1-2 minutes on 2 cores, -j$jobs under nice $nice_level; less with a warm ccache) ..."
start=$(date +%s)
nice -n "$nice_level" cmake --build "$work/build" -j "$jobs" >>"$log" 2>&1 \
  || fail_build "compiling llama.cpp's jinja engine failed"
say "built in $(( $(date +%s) - start )) s"
rm -f "$stamp"
rm -rf "$prefix/include/llama-jinja" "$prefix/lib/libllama-jinja.a" "$prefix/share/llama-jinja"
cmake --install "$work/build" >>"$log" 2>&1 || fail_build "cmake --install failed"
[[ -f $prefix/lib/libllama-jinja.a ]] || fail_build "install produced no $prefix/lib/libllama-jinja.a"
[[ -f $prefix/include/llama-jinja/jinja/runtime.h ]] || fail_build "install produced no headers"
echo "$want_stamp" >"$stamp"
say "installed llama.cpp $version jinja into $prefix (lib/libllama-jinja.a, include/llama-jinja, share/llama-jinja/templates)"
