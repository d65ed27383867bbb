#!/usr/bin/env bash
# The Debian package, tested as an operator installs it (issue 15):
#   - builds the package from BUILD_DIR (cpack);
#   - makes a clean Debian 12 root with mmdebstrap holding systemd, man-db, the packages the
#     .deb's Depends names and python3-pip (a Recommends, for packages), nothing more (so dpkg -i
#     shows that Depends is enough), and boots it as a container with systemd as PID 1;
#   - installs the package and writes a token file, as docs/OPERATING.md says;
#   - checks the unit with systemd-analyze verify, and its exposure with systemd-analyze
#     security (at most kMaxExposure);
#   - fake backend: systemctl enable --now; /healthz, /readyz and /metrics from the host with
#     curl, tools/list and a run through the official MCP SDK (tests/e2e/sdk/installed_check.mjs);
#   - Docker backend, through the host engine's socket, with --self-test and a wheelhouse: the
#     hardened unit audits a real sandbox before it serves, runs real code, installs a run's
#     packages with pip under the unit's own confinement, and on stop leaves no sandbox;
#   - dpkg --remove stops the service and keeps the config file; dpkg --purge removes it and
#     the token file.
# The root is cached as an image named by a hash of its package list.
# Run it when no other server uses this Docker engine: the installed server's startup sweep does
# not see the host's processes, so it would take another live server's sandboxes for leftovers.
# Usage: tests/install/install_test.sh BUILD_DIR
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
container="scs-install-test-$$"
max_exposure=2.0
token="install-test-0123456789abcdef0123"
work="$(mktemp -d)"

log() { printf 'install-test: %s\n' "$*"; }
fail() {
  log "FAILED: $*"
  if docker inspect "$container" >/dev/null 2>&1; then
    log "the service's journal:"
    docker exec "$container" journalctl -u safe-code-sandbox --no-pager -n 80 || true
  fi
  exit 1
}
cleanup() {
  docker rm -f "$container" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
in_root() { docker exec "$container" sh -c "$1"; }
# The journal of the service's current (or last) invocation only, in $work/journal.log (grep -q
# on a pipe would end journalctl early).
invocation() { in_root 'systemctl show -p InvocationID --value safe-code-sandbox'; }
journal() {
  in_root "journalctl _SYSTEMD_INVOCATION_ID=$1 --no-pager -o cat" >"$work/journal.log"
}

# Retries `curl -sf URL` for up to 60 s; prints the body.
fetch() {
  local deadline=$((SECONDS + 60)) body
  while ((SECONDS < deadline)); do
    if body="$(curl -sf --max-time 5 "$1")"; then
      printf '%s' "$body"
      return 0
    fi
    sleep 0.5
  done
  return 1
}

log "building the package"
rm -rf "$build_dir/packages"
(cd "$build_dir" && cpack -G DEB >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
deb="$(ls "$build_dir"/packages/safe-code-sandbox_*_amd64.deb)"
log "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

# Depends, without versions; of alternatives the first.
depends="$(dpkg-deb -f "$deb" Depends | sed 's/([^)]*)//g; s/|[^,]*//g; s/[[:space:]]//g')"
include="systemd,systemd-sysv,man-db,python3-pip,$depends"
image="scs-install-root:$(printf '%s' "$include" | sha256sum | cut -c1-12)"
if ! docker image inspect "$image" >/dev/null 2>&1; then
  log "making a clean Debian 12 root with $include"
  mmdebstrap --variant=minbase --include="$include" bookworm "$work/root.tar" \
    >"$work/mmdebstrap.log" 2>&1 || { tail -20 "$work/mmdebstrap.log"; fail "mmdebstrap"; }
  docker import "$work/root.tar" "$image" >/dev/null
  rm -f "$work/root.tar"
fi

# systemd as PID 1 needs CAP_SYS_ADMIN (the unit's ProtectSystem= and friends are mount
# namespaces), no Docker seccomp or AppArmor profile in its way, and the cgroup tree to read.
# The host engine's socket is there for the Docker backend; its group is the host's docker gid,
# as a host with Docker installed has it.
cgroups=(-v /sys/fs/cgroup:/sys/fs/cgroup:ro)
if [[ "$(stat -f -c %T /sys/fs/cgroup)" == cgroup2fs ]]; then
  # The usual recipe for systemd in a container on the unified hierarchy; this project's
  # machines (cgroup v1) have not exercised it.
  cgroups=(--cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw)
fi
docker run -d --name "$container" --cap-add SYS_ADMIN --security-opt seccomp=unconfined \
  --security-opt apparmor=unconfined --tmpfs /run --tmpfs /run/lock --tmpfs /tmp \
  "${cgroups[@]}" -v /var/run/docker.sock:/var/run/docker.sock \
  "$image" /lib/systemd/systemd >/dev/null
address="$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$container")"
for _ in $(seq 100); do
  state="$(in_root 'systemctl is-system-running 2>/dev/null' || true)"
  [[ "$state" != running && "$state" != degraded ]] || break
  sleep 0.1
done
log "booted $image as $container at $address (systemd: $state)"

log "installing"
in_root "groupadd --system --gid $(stat -c %g /var/run/docker.sock) docker"
docker cp "$deb" "$container:/var/tmp/package.deb"
in_root 'dpkg -i /var/tmp/package.deb' >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
in_root "umask 027 && printf 'alice:$token\n' >/etc/safe-code-sandbox/tokens &&
         chgrp safe-code-sandbox /etc/safe-code-sandbox/tokens"

log "checking the unit"
verify="$(in_root 'systemd-analyze verify /lib/systemd/system/safe-code-sandbox.service 2>&1')" ||
  fail "systemd-analyze verify: $verify"
[[ -z "$verify" ]] || fail "systemd-analyze verify: $verify"
exposure="$(in_root 'systemd-analyze security --no-pager safe-code-sandbox.service' |
  sed -n 's/.*Overall exposure level for safe-code-sandbox.service: \([0-9.]*\).*/\1/p')"
[[ -n "$exposure" ]] || fail "systemd-analyze security gave no exposure level"
awk -v e="$exposure" -v m="$max_exposure" 'BEGIN { exit !(e <= m) }' ||
  fail "the unit's exposure level is $exposure, above $max_exposure"
log "unit verified; exposure level $exposure (at most $max_exposure)"

# The shipped config with the flags a test host needs on top (flags override the file): the
# container's address, where the host reaches it, for MCP and for /metrics.
start_with() {
  in_root "mkdir -p /etc/systemd/system/safe-code-sandbox.service.d && cat >/etc/systemd/system/safe-code-sandbox.service.d/test.conf <<UNIT
[Service]
ExecStart=
ExecStart=/usr/bin/safe-code-sandbox --config /etc/safe-code-sandbox/config.json --http 0.0.0.0:8080 --allowed-hosts $address:8080 --metrics 0.0.0.0:9464 $1
UNIT
systemctl daemon-reload && systemctl $2 safe-code-sandbox"
}
sdk() { node "$root/tests/e2e/sdk/installed_check.mjs" "http://$address:8080/mcp" "$token" "$@"; }

log "fake backend: systemctl enable --now"
start_with "--backend fake" "enable --now"
health="$(fetch "http://$address:8080/healthz")" || fail "/healthz did not answer"
[[ "$health" == '{"status":"ok"}' ]] || fail "/healthz said $health"
ready="$(fetch "http://$address:8080/readyz")" || fail "/readyz never said ready"
log "/readyz: $ready"
sdk '#fake:stdout=hello' >"$work/sdk.log" 2>&1 || { cat "$work/sdk.log"; fail "the MCP SDK check"; }
cat "$work/sdk.log"
grep -q '^run: succeeded "hello"' "$work/sdk.log" || fail "the fake run did not succeed"
metrics="$(fetch "http://$address:9464/metrics")" || fail "/metrics did not answer"
for series in 'scs_runs_started_total{tenant="alice"} 1' \
              'scs_runs_finished_total{status="succeeded",tenant="alice"} 1' \
              'scs_runs_refused_total{reason="queue_full",tenant="alice"} 0' \
              'scs_build_info{backend="fake",version="'"$(dpkg-deb -f "$deb" Version)"'"} 1'; do
  grep -qxF "$series" <<<"$metrics" || fail "/metrics lacks the line $series"
done
log "/metrics counts the run"

log "fake backend that snapshots: systemctl restart with state-dir in the unit's state directory"
start_with "--backend fake --backend-option snapshots=on --state-dir /var/lib/safe-code-sandbox" restart
fetch "http://$address:8080/readyz" >/dev/null || fail "/readyz never said ready with --state-dir"
kept_run="$(invocation)"
for _ in $(seq 50); do  # the journal may trail the server by a moment
  journal "$kept_run"
  grep -q -- '--state-dir /var/lib/safe-code-sandbox: took back 0 of 0 kept sessions' \
    "$work/journal.log" && break
  sleep 0.2
done
grep -q -- '--state-dir /var/lib/safe-code-sandbox: took back 0 of 0 kept sessions' \
  "$work/journal.log" || fail "the server could not keep sessions in the unit's state directory"
owner="$(in_root 'stat -c "%U %a" /var/lib/safe-code-sandbox/sessions')"
[[ "$owner" == "safe-code-sandbox 700" ]] || fail "the session records' directory is $owner"
log "state-dir works under the unit's hardening: $owner"

log "Docker backend: systemctl restart with --self-test and a wheelhouse"
managed() { docker ps -aq --filter label=io.scs.managed | sort; }
before="$(managed)"
/usr/bin/python3 -I "$root/tests/support/make_wheels.py" "$work/wheels" >/dev/null
docker cp "$work/wheels" "$container:/var/lib/safe-code-sandbox-wheelhouse"
in_root 'chown -R root:root /var/lib/safe-code-sandbox-wheelhouse &&
         chmod -R a+rX /var/lib/safe-code-sandbox-wheelhouse'
start_with "--self-test --wheelhouse /var/lib/safe-code-sandbox-wheelhouse" restart
ready="$(fetch "http://$address:8080/readyz")" || fail "/readyz never said ready with Docker"
docker_run="$(invocation)"
journal "$docker_run"
grep -q 'self-test: .* 0 failed' "$work/journal.log" ||
  fail "the self-test audit did not pass under the unit"
sdk 'print(6 * 7)' >"$work/sdk.log" 2>&1 || { cat "$work/sdk.log"; fail "the MCP SDK check"; }
cat "$work/sdk.log"
grep -q '^run: succeeded "42\\n"' "$work/sdk.log" || fail "the Docker run did not succeed"
sdk 'import purepkg; print(purepkg.VERSION)' purepkg >"$work/sdk.log" 2>&1 ||
  { cat "$work/sdk.log"; fail "the MCP SDK check with packages"; }
cat "$work/sdk.log"
grep -q '^run: succeeded "2.0\\n"' "$work/sdk.log" || fail "the run with packages did not succeed"
in_root 'systemctl stop safe-code-sandbox'
journal "$docker_run"
grep -q 'every run stopped; exiting' "$work/journal.log" ||
  fail "the service did not stop cleanly"
[[ "$(managed)" == "$before" ]] || fail "sandboxes were left behind: $(managed)"
docker images -q --filter label=io.scs.package-set | sort -u | xargs -r docker rmi >/dev/null
log "the self-test passed, the runs succeeded (one with packages), and stopping left no sandbox"

log "removing"
in_root 'systemctl start safe-code-sandbox && dpkg --remove safe-code-sandbox' >"$work/dpkg.log" 2>&1 ||
  { cat "$work/dpkg.log"; fail "dpkg --remove"; }
[[ "$(in_root 'systemctl is-active safe-code-sandbox' || true)" != active ]] ||
  fail "the service still runs after dpkg --remove"
in_root 'test -f /etc/safe-code-sandbox/config.json' || fail "dpkg --remove took the config file"
[[ "$(managed)" == "$before" ]] || fail "sandboxes were left behind: $(managed)"
in_root 'dpkg --purge safe-code-sandbox' >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --purge"; }
in_root 'test ! -e /etc/safe-code-sandbox' || fail "dpkg --purge left /etc/safe-code-sandbox"
log "PASSED"
