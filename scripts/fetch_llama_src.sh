#!/usr/bin/env bash
# Fetches llama.cpp's source as vendored in the llama-cpp-python 0.3.36 source distribution on
# PyPI (pinned by version and sha256; PyPI is the one source every machine here can reach) and
# unpacks it. Prints the source directory on stdout. Idempotent: a no-op once unpacked.
#
#   src=$(scripts/fetch_llama_src.sh)     # -> ${CONVEYOR_CACHE:-~/.cache/conveyor}/llama.cpp-0.3.36/src
#
# Used by scripts/build_llama_cpp.sh (the reference binaries), scripts/build_jinja.sh (the chat-template
# engine) and the tests that read llama.cpp's vocabulary files (models/ggml-vocab-*.gguf).
# Needs: python3 with pip (PYTHON=... or this checkout's .venv), tar, gzip, sha256sum.
set -euo pipefail

version=0.3.36
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
cache=${CONVEYOR_CACHE:-${HOME:-/root}/.cache/conveyor}
root=$cache/llama.cpp-$version
src=$root/src

say() { echo "[fetch_llama_src] $*" >&2; }
die() { echo "[fetch_llama_src] error: $*" >&2; exit 1; }

if [[ -f $src/CMakeLists.txt && -f $src/.unpacked ]]; then
  echo "$src"
  exit 0
fi

python=${PYTHON:-}
if [[ -z $python ]]; then
  here=$(cd "$(dirname "$0")/.." && pwd)
  if [[ -x $here/.venv/bin/python ]]; then python=$here/.venv/bin/python; else python=python3; fi
fi

mkdir -p "$root"
exec 9>"$root/.fetch.lock"
flock 9
if [[ -f $src/CMakeLists.txt && -f $src/.unpacked ]]; then echo "$src"; exit 0; fi

dl=$root/download
sdist=$dl/llama_cpp_python-$version.tar.gz
mkdir -p "$dl"
if [[ ! -f $sdist ]]; then
  "$python" -m pip --version >/dev/null 2>&1 || die "'$python -m pip' does not work. HINT: set PYTHON=/path/to/python with pip"
  say "downloading llama-cpp-python $version sdist from PyPI (77 MB)"
  "$python" -m pip download -q --no-binary :all: --no-deps -d "$dl" "llama-cpp-python==$version" >&2 ||
    die "pip download failed. HINT: check that PyPI is reachable (pip config, proxy)"
fi
got=$(sha256sum "$sdist" | cut -d' ' -f1)
if [[ $got != "$sha256" ]]; then
  rm -f "$sdist"
  die "$sdist has sha256 $got, expected $sha256; removed it, run again to download it afresh"
fi

say "unpacking $sdist"
tmp=$root/unpack
rm -rf "$tmp" && mkdir -p "$tmp"
tar -xzf "$sdist" -C "$tmp"
vendored=$tmp/llama_cpp_python-$version/vendor/llama.cpp
[[ -f $vendored/CMakeLists.txt ]] || die "no vendor/llama.cpp in $sdist"
rm -rf "$src"
mv "$vendored" "$src"
rm -rf "$tmp"
touch "$src/.unpacked"
echo "$src"
