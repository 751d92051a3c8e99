#!/usr/bin/env bash
# End-to-end smoke test of docker-compose.yml: builds the image, starts hookproxy, the
# policy-server sidecar (a separate `hookproxy backend` process, called over AHP HTTP) and the
# fake model, then checks the AHP chain across the containers with curl:
#
#   - readiness of the admin port and of the policy server
#   - the image runs as a non-root user
#   - an ordinary request reaches the fake model unchanged
#   - an AWS access key id reaches the fake model redacted ([REDACTED:aws_access_key_id:...]),
#     and the rewrite was made by the policy-server backend
#   - a destructive tool call (the fake model's answer to "clean up my workspace") is removed
#   - with policy-server stopped, an intercepted request is refused (hookproxy.fail_closed)
#   - after policy-server is started again, requests pass again
#
# Usage: deploy/compose-smoke.sh          (from anywhere; needs docker with compose, bash, curl, grep)
# Environment:
#   SMOKE_KEEP=1            leave the services running on exit (default: docker compose down)
#   SMOKE_NO_BUILD=1        do not pass --build (use an existing hookproxy:local image)
#   SMOKE_WAIT=120          seconds to wait for each readiness condition
#   COMPOSE_PROJECT_NAME    as usual for compose
#
# Ports 8080, 9090 and 8000 on 127.0.0.1 must be free (they are published by the compose file).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PROXY=http://127.0.0.1:8080
ADMIN=http://127.0.0.1:9090
MODEL=http://127.0.0.1:8000
WAIT=${SMOKE_WAIT:-120}
BACKEND_ID=hookproxy.compose.policy_server
FAKE_KEY=AKIAZ7Q2X4MPLE3K9WTR # made up: AKIA + 16 upper-case letters and digits
NONCE="smoke-$$-$RANDOM"

if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  COMPOSE=(docker-compose)
else
  echo "compose-smoke: neither 'docker compose' nor 'docker-compose' is available" >&2
  exit 2
fi
compose() { "${COMPOSE[@]}" --profile demo "$@"; }

passed=0
failed=0
pass() { passed=$((passed + 1)); printf 'PASS  %s\n' "$1"; }
fail() {
  failed=$((failed + 1))
  printf 'FAIL  %s\n' "$1"
  if [ -n "${2:-}" ]; then printf '      %s\n' "${2:0:600}"; fi
}

teardown() {
  local rc=$?
  if [ "$failed" -gt 0 ] || [ "$rc" -ne 0 ]; then
    echo "--- last service logs ---"
    compose logs --no-color --tail=25 2>&1 || true
  fi
  if [ "${SMOKE_KEEP:-0}" = 1 ]; then
    echo "compose-smoke: SMOKE_KEEP=1, leaving the services running"
  else
    echo "--- ${COMPOSE[*]} --profile demo down ---"
    compose down --remove-orphans >/dev/null 2>&1 || compose down || true
  fi
}
trap teardown EXIT

# post_chat CONTENT: POST an OpenAI chat completion through the demo route. Sets CODE and BODY.
post_chat() {
  local payload out
  payload="{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"$1\"}]}"
  out=$(curl -sS --max-time 15 -w '\n%{http_code}' "$PROXY/demo/openai/v1/chat/completions" \
    -H 'Content-Type: application/json' -d "$payload" 2>&1) || true
  CODE=${out##*$'\n'}
  BODY=${out%$'\n'*}
}

# received: what the fake model received last. Sets RECEIVED.
received() {
  RECEIVED=$(curl -sS --max-time 10 "$MODEL/_received" 2>&1) || RECEIVED=""
}

# wait_for DESCRIPTION COMMAND...: run COMMAND every second until it succeeds or $WAIT seconds pass.
wait_for() {
  local what=$1 deadline=$((SECONDS + WAIT))
  shift
  until "$@"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail "$what (not within ${WAIT}s)"
      return 1
    fi
    sleep 1
  done
  pass "$what"
}

admin_ready() { curl -fsS --max-time 5 -o /dev/null "$ADMIN/readyz" 2>/dev/null; }
# The fake model answers /_received with 404 until its first request: any HTTP answer will do.
model_up() {
  local code
  code=$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "$MODEL/_received" 2>/dev/null) || true
  [ "$code" = 200 ] || [ "$code" = 404 ]
}
chain_passes() { post_chat "readiness probe $NONCE"; [ "$CODE" = 200 ]; }

build=(--build)
[ "${SMOKE_NO_BUILD:-0}" = 1 ] && build=()
echo "=== ${COMPOSE[*]} --profile demo up ${build[*]} -d ==="
compose up "${build[@]}" -d

# /readyz covers the configuration (and stdio backends), not HTTP backends: the policy server is
# ready when an intercepted request passes.
wait_for "hookproxy admin /readyz answers 200" admin_ready || exit 1
wait_for "fake model answers on :8000" model_up || exit 1
wait_for "an intercepted request passes (policy-server reachable over AHP HTTP)" chain_passes || exit 1

# Non-root: the image's user and the uid of the running processes.
user=$(docker image inspect -f '{{.Config.User}}' hookproxy:local 2>/dev/null || true)
cid=$(compose ps -q hookproxy)
# `docker top` needs the PID column; the second column is the uid of each process.
uids=$(docker top "$cid" -o pid,uid 2>/dev/null | grep -v '^PID' | while read -r _ uid _; do echo "$uid"; done || true)
if [ -n "$user" ] && [ "${user%%:*}" != 0 ] && [ "${user%%:*}" != root ] &&
  [ -n "$uids" ] && ! grep -qx '0' <<<"$uids"; then
  pass "image user is $user, hookproxy runs as uid $(echo $uids)"
else
  fail "hookproxy runs as a non-root user" "image user '$user', process uids '$(echo $uids)'"
fi

# 1. An ordinary request reaches the model unchanged.
post_chat "Please summarize the README $NONCE"
received
if [ "$CODE" = 200 ] && grep -q "Please summarize the README $NONCE" <<<"$RECEIVED"; then
  pass "allowed request: 200, the fake model received it unchanged"
else
  fail "allowed request" "status $CODE body $BODY received $RECEIVED"
fi

# 2. A secret is redacted before it reaches the model, by the policy-server backend.
post_chat "My key is $FAKE_KEY, deploy it $NONCE"
received
if [ "$CODE" = 200 ] && grep -q "deploy it $NONCE" <<<"$RECEIVED" &&
  grep -q '\[REDACTED:aws_access_key_id:' <<<"$RECEIVED" && ! grep -q "$FAKE_KEY" <<<"$RECEIVED"; then
  pass "secret redaction: the fake model received $(grep -o '\[REDACTED:aws_access_key_id:[^]]*\]' <<<"$RECEIVED" | head -n1)"
else
  fail "secret redaction" "status $CODE received $RECEIVED"
fi
logs=$(compose logs --no-color hookproxy 2>&1 || true)
if grep "\"backendId\":\"$BACKEND_ID\"" <<<"$logs" | grep '"effects":\["modify"\]' | grep -q '"enforcement":"rewritten"'; then
  pass "audit: the rewrite was made by $BACKEND_ID (AHP HTTP)"
else
  fail "audit record of the rewrite by $BACKEND_ID"
fi
if curl -sS --max-time 5 "$ADMIN/metrics" 2>/dev/null |
  grep -q "^hookproxy_interceptor_latency_seconds_count{backend=\"$BACKEND_ID\"} [1-9]"; then
  pass "metrics: interceptor calls to $BACKEND_ID counted"
else
  fail "metrics: interceptor calls to $BACKEND_ID counted"
fi

# 3. The fake model answers "clean up my workspace" with a destructive Bash call; it is removed.
post_chat "Please clean up my workspace"
if [ "$CODE" = 200 ] && grep -q 'Tool call Bash was blocked by policy' <<<"$BODY" &&
  ! grep -q '"name":"Bash"' <<<"$BODY"; then
  pass "destructive tool call denied and removed from the response"
else
  fail "destructive tool call denied" "status $CODE body $BODY"
fi
logs=$(compose logs --no-color hookproxy 2>&1 || true)
if grep '"denialCode":"hookproxy.tools.destructive"' <<<"$logs" | grep -q "\"denialBackend\":\"$BACKEND_ID\""; then
  pass "log: denial hookproxy.tools.destructive from $BACKEND_ID"
else
  fail "log: denial hookproxy.tools.destructive from $BACKEND_ID"
fi

# 4. Fail-closed: with the policy server stopped, intercepted requests are refused.
compose stop policy-server >/dev/null 2>&1
post_chat "while the policy server is down $NONCE"
received
if [ "$CODE" = 403 ] && grep -q '"code":"hookproxy.fail_closed"' <<<"$BODY" &&
  ! grep -q "while the policy server is down $NONCE" <<<"$RECEIVED"; then
  pass "policy-server stopped: refused with 403 hookproxy.fail_closed, nothing forwarded"
else
  fail "fail-closed while policy-server is stopped" "status $CODE body $BODY"
fi

# 5. Recovery.
compose start policy-server >/dev/null 2>&1
wait_for "policy-server started again: intercepted requests pass" chain_passes || true
received
if grep -q "readiness probe $NONCE" <<<"$RECEIVED"; then
  pass "after recovery the fake model receives requests again"
else
  fail "after recovery the fake model receives requests again" "received $RECEIVED"
fi

echo "=== $passed passed, $failed failed ==="
[ "$failed" -eq 0 ]
