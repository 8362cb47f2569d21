#!/usr/bin/env bash
# Sets up conveyor on a Debian 12 machine: installs the Debian and Python packages it needs,
# builds it (build/), and fetches the default model. Idempotent; quiet unless something fails.
# Run as root (or with sudo available).
set -euo pipefail
cd "$(dirname "$0")"

log=$(mktemp /tmp/conveyor-setup.XXXXXX.log)
step() {
  local what=$1; shift
  if ! "$@" >>"$log" 2>&1; then
    echo "setup.sh: $what failed. Last lines of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
}

packages=(build-essential cmake ccache pkg-config git ca-certificates python3 python3-venv python3-pip
  libpcre2-dev libcli11-dev nlohmann-json3-dev libboost-test-dev libbenchmark-dev
  libcaf-dev libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libtomlplusplus-dev libspdlog-dev libcpp-httplib-dev libssl-dev libboost-dev
  clang libclang-rt-14-dev libsqlite3-dev nats-server libnats-dev libsentencepiece-dev)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup.sh: installing ${missing[*]} needs root; run it as root" >&2; exit 1; }
    sudo=sudo
  fi
  step "apt-get update" $sudo apt-get update -q
  step "apt-get install ${missing[*]}" env DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi

# Python: the model fetcher, the client and the tools' scripts run from .venv.
if [ ! -x .venv/bin/python ] || [ requirements.txt -nt .venv/.installed ]; then
  step "python venv" python3 -m venv .venv
  step "pip install -r requirements.txt" .venv/bin/pip install -q -r requirements.txt
  touch .venv/.installed
fi

jobs=$(nproc 2>/dev/null || echo 2)
# XGrammar's C++ core (structured outputs) is not packaged by Debian: built once from its PyPI
# source distribution (pinned version and sha256) into /usr/local/xgrammar; a no-op afterwards.
xg_sudo=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && xg_sudo="sudo env PYTHON=$PWD/.venv/bin/python"
step "build xgrammar (scripts/build_xgrammar.sh)" $xg_sudo env JOBS="$jobs" scripts/build_xgrammar.sh
# llama.cpp's Jinja engine (chat templates) is not packaged either: built once from the pinned
# llama.cpp source (scripts/fetch_llama_src.sh) into /usr/local/llama-jinja, with llama.cpp's
# template files the unit tests render; a no-op afterwards.
step "build llama.cpp's jinja (scripts/build_jinja.sh)" $xg_sudo env JOBS="$jobs" scripts/build_jinja.sh
# llama.cpp's source, pinned (scripts/fetch_llama_src.sh; a no-op once unpacked): its vocabulary
# files (models/ggml-vocab-*.gguf) are what the tokenizer goldens test reads (vocab_golden).
step "fetch llama.cpp source (scripts/fetch_llama_src.sh)" env PYTHON="$PWD/.venv/bin/python" scripts/fetch_llama_src.sh
step "cmake configure" cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
step "build" cmake --build build -j "$jobs"
step "fetch smollm2" .venv/bin/python scripts/fetch_model.py smollm2
