#!/usr/bin/env bash
# The side-by-side bench rig (../shared/bench) for every hookproxy column, one after the
# other: builds hookproxy, copies the rig to a work folder (the shared one may be
# read-only), and runs it once per mode, each run with its own direct and nginx (and, for
# the policy chain, Portkey) columns so that every ratio comes from one run:
#   none      no subscription (pass-through)
#   deny      secrets refusing at model.request.before + tools at tool.before, in process
#             (like-for-like with Portkey's deny guardrail; the violation body must be refused)
#   http      one loopback AHP HTTP backend on model.request.before (`hookproxy backend`,
#             the built-in policies, pinned beside wrk and the mock so the proxy keeps its core)
#   goproxy   the rig's stub: Go's own httputil.ReverseProxy and nothing else, the floor of
#             any proxy built on net/http
# Every process binds 127.0.0.1, every load run is bounded by DURATION, and the rig stops
# what it started by PID; this script stops the AHP backend it starts the same way.
#
#   load/rig.sh                         # all modes, ROUNDS=1, c=16
#   MODES="none deny" ROUNDS=3 load/rig.sh
# Needs wrk, nginx and the rig's Portkey install (see ../shared/bench/README.md); prints
# each run's table and writes them all to $OUT (default /tmp/hookproxy-rig/results.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
BENCH_SRC=${BENCH_SRC:-$root/../shared/bench}
WORK=${WORK:-/tmp/hookproxy-rig}
MODES=${MODES:-none deny http goproxy}
OUT=${OUT:-$WORK/results.md}
export ROUNDS=${ROUNDS:-1} CONNS=${CONNS:-16} DURATION=${DURATION:-10s} WARMUP=${WARMUP:-5s}

command -v wrk >/dev/null || { echo "rig.sh: wrk is needed (apt-get install wrk nginx-light)" >&2; exit 1; }
command -v nginx >/dev/null || { echo "rig.sh: nginx is needed (apt-get install nginx-light)" >&2; exit 1; }
mkdir -p "$WORK"
rsync -a --exclude run --exclude bin "$BENCH_SRC/" "$WORK/bench/" 2>/dev/null || cp -r "$BENCH_SRC/." "$WORK/bench/"
chmod -R u+w "$WORK/bench"
if [ ! -d "$WORK/bench/peers/node_modules/@portkey-ai/gateway" ]; then
  (cd "$WORK/bench/peers" && npm ci --no-audit --no-fund --loglevel=error)
fi
go build -o "$WORK/hookproxy" ./cmd/hookproxy
(cd "$WORK/bench/stub-hookproxy" && go build -o "$WORK/bench/bin/stub-hookproxy" .)

backend_pid=""
cleanup() { [ -n "$backend_pid" ] && kill "$backend_pid" 2>/dev/null && wait "$backend_pid" 2>/dev/null; true; }
trap cleanup EXIT INT TERM

: >"$OUT"
echo "# hookproxy rig run $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$root" rev-parse --short HEAD), ROUNDS=$ROUNDS CONNS=$CONNS DURATION=$DURATION" >>"$OUT"
hp=/openai/v1/chat/completions
for mode in $MODES; do
  targets="direct nginx"
  case $mode in
    none) cmd="./hookproxy-launch.sh $WORK/hookproxy none" url=$hp block=0 ;;
    deny) cmd="./hookproxy-launch.sh $WORK/hookproxy deny" url=$hp block=1 targets="direct nginx portkey" ;;
    http)
      taskset -c "${LOADGEN_CPUS:-0}" "$WORK/hookproxy" backend --listen 127.0.0.1:18787 >"$WORK/backend.log" 2>&1 &
      backend_pid=$!
      for _ in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:18787/ && break; sleep 0.1; done
      export AHP_URL=http://127.0.0.1:18787/
      cmd="./hookproxy-launch.sh $WORK/hookproxy http" url=$hp block=0 ;;
    goproxy) cmd='./bin/stub-hookproxy -listen 127.0.0.1:$HOOKPROXY_PORT -upstream $UPSTREAM_URL' url=/v1/chat/completions block=1 ;;
    *) echo "rig.sh: unknown mode $mode" >&2; exit 2 ;;
  esac
  echo "== rig: $mode" >&2
  run_dir="$WORK/bench/run/$mode-$(date -u +%H%M%S)"
  (cd "$WORK/bench" && TARGETS="$targets" RUN_DIR="$run_dir" HOOKPROXY_CMD="$cmd" HOOKPROXY_NAME="hookproxy-$mode" \
    HOOKPROXY_URL="http://127.0.0.1:18083$url" HOOKPROXY_BLOCK_CHECK=$block ./run.sh)
  { echo; echo "## $mode"; echo; cat "$run_dir/results.md"; } >>"$OUT"
  if [ -n "$backend_pid" ]; then kill "$backend_pid"; wait "$backend_pid" 2>/dev/null || true; backend_pid=""; fi
done
echo "rig.sh: results in $OUT" >&2
