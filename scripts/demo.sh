#!/usr/bin/env bash
# conveyor's main demo: starts `conveyor serve` with the default model, runs scripts/demo.py (a
# producer that streams several concurrent chat jobs live, then prints a summary), and stops the
# server with SIGTERM. Run it after ./setup.sh, from anywhere:
#
#   scripts/demo.sh [demo.py flags, e.g. --jobs 6]
#
# Environment (all optional):
#   CONVEYOR_BIN      the conveyor binary (default build/conveyor)
#   CONVEYOR_PYTHON   the Python with pyzmq and msgpack (default .venv/bin/python)
#   CONVEYOR_ROUTER, CONVEYOR_PUB, CONVEYOR_PULL   endpoints. Unset, the defaults
#                     (tcp://127.0.0.1:5555/5556/5557) are used, or free ports when those are busy.
#   CONVEYOR_MODEL    model name or GGUF path (default smollm2)
#   CONVEYOR_START_TIMEOUT   seconds to wait for the server to answer (default 120)
# The server journals into the run's temporary directory (deleted at the end): the demo leaves
# no state behind. A real deployment keeps its --state-dir (default ~/.local/state/conveyor).
# Exit status: demo.py's when it fails, else the server's (0 after a clean drain).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

bin=${CONVEYOR_BIN:-build/conveyor}
py=${CONVEYOR_PYTHON:-.venv/bin/python}
model=${CONVEYOR_MODEL:-smollm2}
start_timeout=${CONVEYOR_START_TIMEOUT:-120}
[ -x "$bin" ] || { echo "demo.sh: $bin not found; run ./setup.sh first (or set CONVEYOR_BIN)" >&2; exit 1; }
[ -x "$py" ] || { echo "demo.sh: $py not found; run ./setup.sh first (or set CONVEYOR_PYTHON)" >&2; exit 1; }
export PYTHONPATH="$root/clients/python${PYTHONPATH:+:$PYTHONPATH}"

tmp=$(mktemp -d /tmp/conveyor-demo.XXXXXX)
log=$tmp/serve.log
server=""

stop_server() {  # SIGTERM, then wait; prints nothing unless it failed. Sets server_rc.
  server_rc=0
  if [ -n "$server" ]; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" || server_rc=$?
    server=""
  fi
}
cleanup() {
  stop_server
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo; echo "demo.sh: interrupted" >&2; exit 130' INT TERM
trap 'exit 129' HUP
trap 'exit 141' PIPE  # e.g. `scripts/demo.sh | head`: still stop the server

show_log() {
  echo "demo.sh: last lines of the server's log:" >&2
  tail -n 20 "$log" >&2
}

# Starts the server on $1 $2 $3; returns 0 once its start-up line is out (endpoints parsed into
# router/pub/pull), 1 when it exited before that, with the log in $log.
start_server() {
  : >"$log"
  # The server logs to stdout and stderr: both go to $log.
  "$bin" serve --model "$model" --router "$1" --pub "$2" --pull "$3" --state-dir "$tmp/state" >"$log" 2>&1 &
  server=$!
  local waited=0 line
  while :; do
    line=$(grep -m1 -E 'conveyor serve: .* router [^ ]+ pub [^ ]+ pull [^ ]+' "$log" || true)
    if [ -n "$line" ]; then
      router=$(sed -E 's/.* router ([^ ]+) pub .*/\1/' <<<"$line")
      pub=$(sed -E 's/.* pub ([^ ]+) pull .*/\1/' <<<"$line")
      pull=$(sed -E 's/.* pull ([^ ]+).*/\1/' <<<"$line")
      return 0
    fi
    if ! kill -0 "$server" 2>/dev/null; then
      wait "$server" || true
      server=""
      return 1
    fi
    if ((waited >= start_timeout * 10)); then
      echo "demo.sh: the server printed no start-up line within ${start_timeout}s" >&2
      show_log
      exit 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
}

echo "demo.sh: starting $bin serve --model $model"
if [ -n "${CONVEYOR_ROUTER:-}${CONVEYOR_PUB:-}${CONVEYOR_PULL:-}" ]; then
  start_server "${CONVEYOR_ROUTER:-tcp://127.0.0.1:5555}" "${CONVEYOR_PUB:-tcp://127.0.0.1:5556}" \
               "${CONVEYOR_PULL:-tcp://127.0.0.1:5557}" || { echo "demo.sh: the server failed to start" >&2; show_log; exit 1; }
elif ! start_server tcp://127.0.0.1:5555 tcp://127.0.0.1:5556 tcp://127.0.0.1:5557; then
  if grep -q 'cannot bind' "$log"; then
    echo "demo.sh: the default ports 5555-5557 are busy; using free ones"
    start_server 'tcp://127.0.0.1:*' 'tcp://127.0.0.1:*' 'tcp://127.0.0.1:*' || { echo "demo.sh: the server failed to start" >&2; show_log; exit 1; }
  else
    echo "demo.sh: the server failed to start" >&2
    show_log
    exit 1
  fi
fi
echo "demo.sh: server pid $server: router $router pub $pub pull $pull"

# Wait for `health` to answer "serving".
if ! "$py" - "$router" "$pub" "$start_timeout" <<'EOF'
import sys, time
from conveyor_client import Client, ConveyorError
router, pub, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
deadline = time.monotonic() + timeout
with Client(router, pub, request_timeout=1.0, retries=0) as c:
    while True:
        try:
            if c.health().get("status") == "serving":
                sys.exit(0)
        except ConveyorError:
            pass
        if time.monotonic() > deadline:
            sys.stderr.write("demo.sh: the server at %s did not answer health within %gs\n"
                             % (router, timeout))
            sys.exit(1)
        time.sleep(0.1)  # a refused attempt came back at once: don't spin
EOF
then
  show_log
  exit 1
fi

demo_rc=0
"$py" scripts/demo.py --router "$router" --pub "$pub" "$@" || demo_rc=$?

echo "demo.sh: stopping the server (SIGTERM)"
stop_server
if ((server_rc != 0)); then
  echo "demo.sh: the server exited with status $server_rc" >&2
  show_log
fi
if ((demo_rc != 0)); then
  echo "demo.sh: demo.py failed (exit status $demo_rc)" >&2
  exit "$demo_rc"
fi
exit "$server_rc"
