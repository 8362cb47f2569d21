#!/usr/bin/env bash
# Builds llama.cpp's Jinja engine (common/jinja/*, MIT) as a static library from the pinned
# llama.cpp source that scripts/fetch_llama_src.sh unpacks, and installs it into a prefix:
#
#   <prefix>/include/llama-jinja/jinja/*.h      the engine (#include "llama-jinja/jinja/runtime.h")
#   <prefix>/include/llama-jinja/{json,unicode}.h  common_json (the engine's input type) and unicode
#   <prefix>/lib/libllama-jinja.a               static library (Release, -fPIC)
#   <prefix>/lib/libllama-chat.a                llama.cpp's chat layer (common/chat*, peg-parser,
#                                               json-schema-to-grammar, parsers/*): templates with
#                                               tools, tool-call parsers and grammars; linked with
#                                               scripts/llama_chat_shim.cpp instead of libllama
#   <prefix>/include/llama-jinja/{common,llama}/ the chat layer's headers (common/*.h) and the
#                                               llama.h / ggml*.h declarations they include
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
# sources are not edited), common/unicode.cpp; for libllama-chat.a the chat sources listed in
# the CMakeLists below, with the real llama.h/ggml.h headers and scripts/llama_chat_shim.cpp
# defining the dozen llama.cpp functions they reference but conveyor never calls.
# Debian 12 packages needed (setup.sh installs them): cmake g++ nlohmann-json3-dev, plus what
# scripts/fetch_llama_src.sh needs (python3 with pip, tar, sha256sum), util-linux (flock).
# Optional: ccache (compiler launcher), ninja-build (generator). Network: PyPI, on first fetch.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Pinned by scripts/fetch_llama_src.sh: llama.cpp as vendored in llama-cpp-python's sdist.
version=$(sed -n 's/^version=//p' "$here/fetch_llama_src.sh")
sha256=$(sed -n 's/^sha256=//p' "$here/fetch_llama_src.sh")
recipe=r2  # bump when the file list or flags below change
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
     && -f $prefix/lib/libllama-chat.a && -f $prefix/include/llama-jinja/common/chat.h \
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
for f in jinja/runtime.h jinja/caps.cpp json.cpp json.h unicode.cpp unicode.h chat.cpp chat.h peg-parser.cpp \
         parsers/sources.cmake json-schema-to-grammar.cpp; do
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

# llama.cpp's chat layer, without its model library (CONVEYOR_SHIM defines what it references).
include(${LLAMA_COMMON}/parsers/sources.cmake)
foreach(f chat.cpp chat-auto-parser-generator.cpp chat-auto-parser-helpers.cpp chat-diff-analyzer.cpp
          chat-peg-parser.cpp peg-parser.cpp json-schema.cpp json-schema-to-grammar.cpp trie.cpp)
  list(APPEND chat_sources ${LLAMA_COMMON}/${f})
endforeach()
add_library(llama-chat STATIC ${chat_sources} ${LLAMA_CHAT_PARSERS_SOURCES} ${CONVEYOR_SHIM})
target_include_directories(llama-chat PRIVATE ${LLAMA_COMMON} ${LLAMA_ROOT}/include ${LLAMA_ROOT}/ggml/include)
target_link_libraries(llama-chat PRIVATE nlohmann_json::nlohmann_json)
install(TARGETS llama-chat ARCHIVE DESTINATION lib)
file(GLOB common_headers ${LLAMA_COMMON}/*.h)
install(FILES ${common_headers} DESTINATION include/llama-jinja/common)
file(GLOB llama_headers ${LLAMA_ROOT}/include/*.h ${LLAMA_ROOT}/ggml/include/*.h)
install(FILES ${llama_headers} DESTINATION include/llama-jinja/llama)
EOF

# -fmacro-prefix-map: no build-machine paths in __FILE__ (GGML_ASSERT messages).
say "configuring (Release, static, -fPIC; log: $log)"
configure_static "$work" "$work/build" "-fmacro-prefix-map=$src/=" -DLLAMA_COMMON="$common" -DLLAMA_ROOT="$src" \
  -DCONVEYOR_SHIM="$here/llama_chat_shim.cpp"

# ---- build + install -------------------------------------------------------------------------
say "building (about 3 minutes on 2 cores, -j$jobs under nice $nice_level; less with a warm ccache) ..."
start=$(date +%s)
nice -n "$nice_level" cmake --build "$work/build" -j "$jobs" >>"$log" 2>&1 \
  || fail_build "compiling llama.cpp's jinja engine failed"
say "built in $(( $(date +%s) - start )) s"
rm -f "$stamp"
rm -rf "$prefix/include/llama-jinja" "$prefix/lib/libllama-jinja.a" "$prefix/lib/libllama-chat.a" "$prefix/share/llama-jinja"
cmake --install "$work/build" >>"$log" 2>&1 || fail_build "cmake --install failed"
for lib in libllama-jinja.a libllama-chat.a; do
  [[ -f $prefix/lib/$lib ]] || fail_build "install produced no $prefix/lib/$lib"
done
[[ -f $prefix/include/llama-jinja/jinja/runtime.h ]] || fail_build "install produced no headers"
echo "$want_stamp" >"$stamp"
say "installed llama.cpp $version jinja into $prefix (lib/libllama-jinja.a, lib/libllama-chat.a, include/llama-jinja, share/llama-jinja/templates)"
