#!/usr/bin/env bash
# hookproxy under load, on loopback: builds hookproxy and load/loadgen, starts a
# paced fake upstream, an AHP backend that never answers and two hookproxy processes, runs
#   streams — N concurrent paced streams through the policy chain (RSS per stream, total),
#   soak    — a steady rate with the policies on (goroutines, open files, heap must not grow),
#   hang    — N concurrent requests whose model.request.before backend hangs (none waits
#             longer than its timeoutMs; the proxy still serves afterwards),
# prints each scenario's "LOAD ..." lines and stops every process it started, by PID, on
# exit (also on error or Ctrl-C).
#
#   load/run.sh short    # CI: 200 streams, 30 s soak, 100 hanging requests (about 1.5 min)
#   load/run.sh full     # docs/benchmarks.md figures: 1,000 streams, 10 min soak, 500 hanging requests
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-short}
case $mode in
  # The short soak is 30 s: at the default GC target the proxy collects once or not at all in
  # that time, which leaves the heap check nothing to compare, so the short run's proxies
  # collect at GOGC=20 (several collections in the soak). The full run keeps the default.
  short) STREAMS=${STREAMS:-200} SOAK=${SOAK:-30s} RATE=${RATE:-40} HANG=${HANG:-100} PROXY_GOGC=${PROXY_GOGC:-20} ;;
  full) STREAMS=${STREAMS:-1000} SOAK=${SOAK:-10m} RATE=${RATE:-50} HANG=${HANG:-500} PROXY_GOGC=${PROXY_GOGC:-} ;;
  *) echo "usage: $0 short|full" >&2; exit 2 ;;
esac
CHUNKS=${CHUNKS:-20} CHUNK_DELAY=${CHUNK_DELAY:-100ms}
# Each stream holds two connections in the proxy and one in the client.
ulimit -n "$(( STREAMS * 4 + 1024 ))" 2>/dev/null || true

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "== build"
go build -o "$work/hookproxy" ./cmd/hookproxy
go build -o "$work/loadgen" ./load/loadgen

# start NAME CMD...: runs CMD in the background, logging to $work/NAME.log.
start() {
  local name=$1; shift
  "$@" >"$work/$name.log" 2>&1 &
  pids+=("$!")
  eval "pid_$name=$!"
}
# addr NAME PATTERN: waits for PATTERN's first match (an address) in NAME's log.
addr() {
  for _ in $(seq 1 200); do
    if a=$(grep -o -m1 -E "$2" "$work/$1.log" 2>/dev/null); then
      echo "$a" | grep -o -E '127\.0\.0\.1:[0-9]+' | head -1
      return
    fi
    sleep 0.05
  done
  echo "$1 did not start:" >&2; cat "$work/$1.log" >&2; exit 1
}

start upstream "$work/loadgen" upstream -chunks "$CHUNKS" -chunk-delay "$CHUNK_DELAY"
start hangbackend "$work/loadgen" hang-backend
up=$(addr upstream 'LISTEN 127\.0\.0\.1:[0-9]+')
hb=$(addr hangbackend 'LISTEN 127\.0\.0\.1:[0-9]+')

# proxy NAME REGISTRATION: a hookproxy serving /openai in front of the fake upstream.
proxy() {
  cat >"$work/$1.yaml" <<YAML
listen: 127.0.0.1:$("$work/loadgen" freeport)
admin: 127.0.0.1:$("$work/loadgen" freeport)
registration: $work/$1.json
routes:
  - prefix: /openai
    api: openai
    upstream: http://$up
YAML
  echo "$2" >"$work/$1.json"
  if [ -n "$PROXY_GOGC" ]; then
    start "$1" env GOGC="$PROXY_GOGC" "$work/hookproxy" serve --config "$work/$1.yaml"
  else
    start "$1" "$work/hookproxy" serve --config "$work/$1.yaml"
  fi
}
sub='"mode": "intercept", "failurePolicy": "fail-closed", "content": {"default": "body"}'
proxy policies '{"protocolVersion": "draft", "hooks": [
 {"id": "dev.hookproxy.secrets", "transport": {"type": "in_process", "policy": "secrets", "config": {}},
  "subscriptions": [{"events": ["model.request.before", "tool.after"], "timeoutMs": 2000, '"$sub"'}]},
 {"id": "dev.hookproxy.tools", "transport": {"type": "in_process", "policy": "tools", "config": {"destructive": true}},
  "subscriptions": [{"events": ["tool.before"], "timeoutMs": 2000, '"$sub"'}]}]}'
proxy hang '{"protocolVersion": "draft", "hooks": [
 {"id": "dev.load.hanging", "transport": {"type": "http", "url": "http://'"$hb"'/ahp/hooks"},
  "subscriptions": [{"events": ["model.request.before"], "timeoutMs": 1000, '"$sub"'}]}]}'
pa=$(addr policies '"listen":"127\.0\.0\.1:[0-9]+')
pm=$(addr policies '"admin":"127\.0\.0\.1:[0-9]+')
ha=$(addr hang '"listen":"127\.0\.0\.1:[0-9]+')
echo "upstream $up, hanging backend $hb, proxy (policies) $pa admin $pm, proxy (hanging backend) $ha"

status=0
echo "== streams: $STREAMS concurrent, $CHUNKS chunks $CHUNK_DELAY apart, through secrets + tools"
"$work/loadgen" streams -url "http://$pa/openai/v1/chat/completions" -n "$STREAMS" -pid "$pid_policies" || status=1
echo "== soak: $RATE req/s for $SOAK through secrets + tools"
"$work/loadgen" soak -url "http://$pa/openai/v1/chat/completions" -metrics "http://$pm/metrics" -rate "$RATE" -duration "$SOAK" \
  -sample "$([ "$mode" = short ] && echo 2s || echo 15s)" || status=1
echo "== hang: $HANG concurrent requests, model.request.before backend never answers (timeoutMs 1000, fail-closed)"
"$work/loadgen" hang -url "http://$ha/openai/v1/chat/completions" -n "$HANG" -backend-timeout 1s || status=1
# Afterwards both proxies still serve at once (no connection or goroutine exhaustion).
for a in "$pa" "$ha"; do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H 'Content-Type: application/json' \
    -d '{"model":"gpt-4o","messages":[{"role":"user","content":"ok?"}]}' "http://$a/openai/v1/chat/completions") || code=000
  echo "LOAD after proxy=$a status=$code"
  case $a in "$pa") [ "$code" = 200 ] || status=1 ;; "$ha") [ "$code" = 403 ] || status=1 ;; esac
done
echo "LOAD rss_kib policies=$(awk '/VmRSS/{print $2}' /proc/"$pid_policies"/status) hang=$(awk '/VmRSS/{print $2}' /proc/"$pid_hang"/status)"
exit $status
