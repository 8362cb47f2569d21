#!/usr/bin/env bash
# Builds XGrammar's C++ core (structured outputs: JSON schema, builtin JSON, regex, EBNF) from the
# xgrammar source distribution on PyPI and installs it into a prefix:
#
#   <prefix>/include/xgrammar/*.h   public headers (#include <xgrammar/xgrammar.h>)
#   <prefix>/include/dlpack/*.h     DLPack, included by xgrammar/matcher.h (picojson is only used
#                                   inside the library, not by public headers, so it is not installed)
#   <prefix>/lib/libxgrammar.a      static library (Release, -fPIC, no LTO, no Python bindings)
#   <prefix>/share/doc/xgrammar/    licenses (Apache-2.0; dlpack Apache-2.0; picojson BSD-2)
#   <prefix>/.xgrammar-stamp        "<version> <sha256>": present only after a complete install
#
# Consumed by cmake/FindXGrammar.cmake (find_package(XGrammar) -> target XGrammar::xgrammar).
#
#   scripts/build_xgrammar.sh                    # -> /usr/local/xgrammar (needs root)
#   scripts/build_xgrammar.sh /opt/xgrammar      # or XGRAMMAR_PREFIX=/opt/xgrammar
#   JOBS=2 NICE=10 PYTHON=/path/to/python3 scripts/build_xgrammar.sh
#
# Idempotent: exits at once when the stamp file says the pinned version is installed.
# Set XGRAMMAR_FORCE=1 to rebuild anyway.
#
# Debian 12 packages needed (setup.sh installs them): cmake (>= 3.18) g++ (C++17) make or
# ninja-build, python3-pip or a venv with pip (for `pip download`), ca-certificates, tar, gzip,
# coreutils (sha256sum), util-linux (flock). Optional: ccache (used as CMAKE_CXX_COMPILER_LAUNCHER
# when present), ninja-build (used as generator when present).
# Network: PyPI (the sdist, plus the wheels pip needs to read its metadata).
set -euo pipefail

version=0.2.8
sha256=8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80
sdist_name=xgrammar-$version.tar.gz

prefix=${1:-${XGRAMMAR_PREFIX:-/usr/local/xgrammar}}
jobs=${JOBS:-2}
nice_level=${NICE:-10}
cache=${CONVEYOR_CACHE:-${HOME:-/root}/.cache/conveyor}
stamp=$prefix/.xgrammar-stamp
want_stamp="$version $sha256"

say() { echo "xgrammar: $*" >&2; }
die() { echo "xgrammar: error: $*" >&2; exit 1; }

[[ $prefix == /* ]] || prefix=$(pwd)/$prefix
stamp=$prefix/.xgrammar-stamp

if [[ ${XGRAMMAR_FORCE:-0} != 1 && -f $stamp && "$(cat "$stamp")" == "$want_stamp" \
      && -f $prefix/lib/libxgrammar.a && -f $prefix/include/xgrammar/xgrammar.h \
      && -f $prefix/include/dlpack/dlpack.h ]]; then
  say "$version already installed in $prefix (stamp $stamp); nothing to do"
  exit 0
fi

# ---- prerequisites ---------------------------------------------------------------------------
for tool in cmake c++ tar sha256sum; do
  command -v "$tool" >/dev/null \
    || die "'$tool' not found. HINT: apt-get install cmake g++ coreutils tar"
done
cmake_version=$(cmake --version | sed -n 's/^cmake version \([0-9][0-9.]*\).*/\1/p')
if [[ -z $cmake_version ]] || ! printf '3.18\n%s\n' "$cmake_version" | sort -V -C; then
  die "cmake >= 3.18 required, found '${cmake_version:-unknown}'"
fi
python=${PYTHON:-}
if [[ -z $python ]]; then
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  if [[ -x $here/.venv/bin/python ]]; then python=$here/.venv/bin/python; else python=python3; fi
fi
"$python" -m pip --version >/dev/null 2>&1 \
  || die "'$python -m pip' does not work. HINT: apt-get install python3-pip, or set PYTHON=/path/to/python-with-pip"
if ! mkdir -p "$prefix" 2>/dev/null || [[ ! -w $prefix ]]; then
  die "cannot write to prefix $prefix (run as root, or pass a writable prefix as \$1 / XGRAMMAR_PREFIX)"
fi

# ---- download + verify -----------------------------------------------------------------------
dl=$cache/downloads
mkdir -p "$dl"
sdist=$dl/$sdist_name
verify() { echo "$sha256  $1" | sha256sum -c --status; }
if [[ -f $sdist ]] && ! verify "$sdist"; then
  say "cached $sdist has the wrong sha256; downloading it again"
  rm -f "$sdist"
fi
if [[ ! -f $sdist ]]; then
  say "downloading xgrammar $version source distribution from PyPI (pip download)"
  tmp_dl=$(mktemp -d "$dl/xgrammar-dl.XXXXXX")
  # --no-binary xgrammar (not :all:): pip prepares the sdist's metadata in an isolated build env;
  # with :all: it would also compile that env's build requirements (cmake itself, apache-tvm-ffi)
  # from source, tens of minutes on 2 cores. Only xgrammar itself must be the sdist.
  if ! "$python" -m pip download --no-deps --no-binary xgrammar -d "$tmp_dl" \
        "xgrammar==$version" >"$tmp_dl/pip.log" 2>&1; then
    tail -n 20 "$tmp_dl/pip.log" >&2
    die "pip download of xgrammar==$version failed (log above; is PyPI reachable?)"
  fi
  [[ -f $tmp_dl/$sdist_name ]] \
    || die "pip download produced no $sdist_name in $tmp_dl (see $tmp_dl/pip.log)"
  mv "$tmp_dl/$sdist_name" "$sdist"
  rm -rf "$tmp_dl"
fi
if ! verify "$sdist"; then
  got=$(sha256sum "$sdist" | cut -d' ' -f1)
  rm -f "$sdist"
  die "sha256 mismatch for $sdist_name: expected $sha256, got $got (file removed)"
fi
say "sdist verified: $sdist (sha256 $sha256)"

# ---- unpack + configure ----------------------------------------------------------------------
# A fixed build directory (not mktemp): source paths are part of every compile command, so only a
# stable path lets ccache reuse objects across runs. A lock keeps concurrent runs apart.
work=$cache/xgrammar-$version-build
log=$cache/xgrammar-$version-build.log
exec 9>"$cache/xgrammar-build.lock"
if command -v flock >/dev/null; then
  flock -n 9 || { say "another build_xgrammar.sh is running; waiting for it"; flock 9; }
  if [[ ${XGRAMMAR_FORCE:-0} != 1 && -f $stamp && "$(cat "$stamp")" == "$want_stamp" ]]; then
    say "$version was installed into $prefix meanwhile; nothing to do"
    exit 0
  fi
fi
# shellcheck source=scripts/build_workdir.sh
source "$(dirname "$0")/build_workdir.sh"
begin_workdir "$work" "$log"

tar -xzf "$sdist" -C "$work"
src=$work/xgrammar-$version
build=$work/build
[[ -f $src/CMakeLists.txt && -f $src/include/xgrammar/xgrammar.h \
   && -f $src/3rdparty/dlpack/include/dlpack/dlpack.h && -f $src/3rdparty/picojson/picojson.h ]] \
  || die "unexpected sdist layout in $sdist_name (CMakeLists.txt, include/xgrammar, 3rdparty/{dlpack,picojson})"
mkdir -p "$build"
# xgrammar's CMakeLists includes <build>/config.cmake first if present; its own cmake/config.cmake
# would force XGRAMMAR_BUILD_PYTHON_BINDINGS ON (needs tvm-ffi). Ours builds the C++ core only.
cat >"$build/config.cmake" <<'EOF'
set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)
set(XGRAMMAR_BUILD_CXX_TESTS OFF)
set(XGRAMMAR_ENABLE_CPPTRACE OFF)
set(XGRAMMAR_ENABLE_COVERAGE OFF)
set(XGRAMMAR_ENABLE_INTERNAL_CHECK OFF)
EOF

# -fno-lto: upstream adds -flto=auto, which would put GCC-only LTO bytecode into the static
# library (unlinkable by clang, or by another GCC version). -Wno-error: upstream builds with
# -Werror; a new compiler warning must not fail our build. Both come after upstream's flags.
# -fmacro-prefix-map: xgrammar's error messages embed __FILE__; make it "cpp/foo.cc", not the
# build directory's absolute path.
say "configuring (Release, static, -fPIC, C++ core only; log: $log)"
configure_static "$src" "$build" "-fno-lto -Wno-error -fmacro-prefix-map=$src/=" \
  -DCMAKE_INSTALL_LIBDIR=lib \
  -DXGRAMMAR_BUILD_PYTHON_BINDINGS=OFF \
  -DXGRAMMAR_BUILD_CXX_TESTS=OFF \
  -DXGRAMMAR_ENABLE_CPPTRACE=OFF
grep -q "Build Python bindings: OFF" "$log" \
  || fail_build "configure did not turn the Python bindings off (sdist layout changed?)"

# ---- build -----------------------------------------------------------------------------------
say "building (about 1-3 minutes on 2 cores, -j$jobs under nice $nice_level; less with a warm ccache) ..."
start=$(date +%s)
nice -n "$nice_level" cmake --build "$build" -j "$jobs" --target xgrammar >>"$log" 2>&1 \
  || fail_build "compiling xgrammar $version failed"
say "built in $(( $(date +%s) - start )) s"

# ---- install ---------------------------------------------------------------------------------
say "installing into $prefix"
rm -f "$stamp"
rm -rf "$prefix/include/xgrammar" "$prefix/include/dlpack" "$prefix/lib/libxgrammar.a"
cmake --install "$build" >>"$log" 2>&1 || fail_build "cmake --install failed"
# Upstream's install() rules cover lib + include/xgrammar + include/dlpack; check, don't trust.
[[ -f $prefix/lib/libxgrammar.a ]] || fail_build "install produced no $prefix/lib/libxgrammar.a"
[[ -f $prefix/include/xgrammar/xgrammar.h ]] || fail_build "install produced no xgrammar headers"
[[ -f $prefix/include/dlpack/dlpack.h ]] || fail_build "install produced no dlpack/dlpack.h"
doc=$prefix/share/doc/xgrammar
mkdir -p "$doc"
cp -f "$src/LICENSE" "$doc/LICENSE"
if [[ -f $src/NOTICE ]]; then cp -f "$src/NOTICE" "$doc/NOTICE"; fi
cp -f "$src/3rdparty/dlpack/LICENSE" "$doc/LICENSE.dlpack"
# picojson's license is the comment block at the top of the header (it is linked into the lib).
sed -n '1,/\*\//p' "$src/3rdparty/picojson/picojson.h" >"$doc/LICENSE.picojson"
echo "$want_stamp" >"$stamp"
say "installed xgrammar $version into $prefix (lib/libxgrammar.a, include/{xgrammar,dlpack})"
