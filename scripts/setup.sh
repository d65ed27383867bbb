#!/usr/bin/env bash
# Idempotent set-up shared by scripts/run and scripts/test: install what is missing (Debian
# packages), build with CMake, start a Docker engine when none answers, build the sandbox image
# when missing. Every line of output goes to stderr: stdout belongs to the MCP protocol.
#
# Environment:
#   SCS_SKIP_DOCKER=1    no Docker engine, image or Docker packages (fake backend only)
#   SCS_SKIP_BUILD=1     do not run CMake
#   SCS_WITH_RUNSC=1     also install gVisor (runsc) and register it as the Docker runtime "runsc"
#   SCS_BUILD_DIR        build directory (default: build)
#   SCS_BUILD_TYPE       CMake build type of a new build directory (default: RelWithDebInfo)
#   SCS_JOBS             parallel build jobs (default: nproc)
#   IMAGE                sandbox image to build (default: safe-code-sandbox:latest)
set -euo pipefail
exec 1>&2 </dev/null

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SCS_BUILD_DIR:-$root/build}"
[[ "$build_dir" == /* ]] || build_dir="$root/$build_dir"
export DEBIAN_FRONTEND=noninteractive

log() { printf 'setup: %s\n' "$*"; }
want_docker() { [[ "${SCS_SKIP_DOCKER:-0}" != 1 ]]; }

is_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

install_missing_packages() {
  local wanted=(build-essential cmake pkg-config libpoco-dev libboost-dev
                libboost-filesystem-dev libgtest-dev libgmock-dev googletest)
  # Node may come from elsewhere (nodesource, nvm): Debian's nodejs only when there is no node.
  command -v node >/dev/null || wanted+=(nodejs)
  command -v npm >/dev/null || wanted+=(npm)
  if want_docker; then
    # Any Docker engine will do (docker-ce included); Debian's docker.io only when none exists.
    command -v dockerd >/dev/null || wanted+=(docker.io)
    command -v mmdebstrap >/dev/null || wanted+=(mmdebstrap)
    [[ "${SCS_WITH_RUNSC:-0}" != 1 ]] || command -v runsc >/dev/null || wanted+=(runsc)
  fi
  local missing=() package
  for package in "${wanted[@]}"; do
    is_installed "$package" || missing+=("$package")
  done
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
}

build() {
  local jobs="${SCS_JOBS:-$(nproc)}"
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    log "configuring $build_dir"
    cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE="${SCS_BUILD_TYPE:-RelWithDebInfo}"
  fi
  log "building in $build_dir (-j$jobs)"
  cmake --build "$build_dir" -j"$jobs"
}

# Registers runsc with the engine when it is installed: merges into daemon.json, never clobbers.
# Prints "changed" when the file was rewritten.
register_runsc() {
  command -v runsc >/dev/null || return 0
  python3 - "$(command -v runsc)" <<'EOF'
import json, os, sys
path, runsc = "/etc/docker/daemon.json", sys.argv[1]
config = {}
if os.path.exists(path):
    with open(path) as f:
        text = f.read()
    config = json.loads(text) if text.strip() else {}
wanted = {"path": runsc, "runtimeArgs": ["--network=none"]}
if config.get("runtimes", {}).get("runsc") != wanted:
    config.setdefault("runtimes", {})["runsc"] = wanted
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print("changed")
EOF
}

wait_for_docker() {
  local deadline=$((SECONDS + $1))
  until docker info >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

start_docker() {
  local runsc_changed
  runsc_changed="$(register_runsc)"
  if docker info >/dev/null 2>&1; then
    if [[ "$runsc_changed" == changed ]]; then
      log "runsc registered; reloading the engine's configuration"
      kill -HUP "$(cat /var/run/docker.pid)"
    fi
    return 0
  fi
  log "no Docker engine answers; starting dockerd (log: /var/log/scs-dockerd.log)"
  # Detached from this session and from every inherited descriptor: an MCP client waits for EOF
  # on the server's stdout, and a daemon holding it would keep the pipe open forever.
  setsid nohup dockerd </dev/null >>/var/log/scs-dockerd.log 2>&1 9>&- &
  if ! wait_for_docker 30; then
    log "dockerd did not answer within 30 s; last lines of /var/log/scs-dockerd.log:"
    tail -n 20 /var/log/scs-dockerd.log
    return 1
  fi
  log "dockerd is up"
}

main() {
  local started=$SECONDS
  mkdir -p "$build_dir"
  # run and test may start at the same time; one set-up at a time per build directory.
  exec 9>"$build_dir/.setup.lock"
  flock 9
  install_missing_packages
  [[ "${SCS_SKIP_BUILD:-0}" == 1 ]] || build
  if want_docker; then
    start_docker
    "$root/docker/build-image.sh" "${IMAGE:-safe-code-sandbox:latest}"
  fi
  log "ready in $((SECONDS - started)) s"
}

main "$@"
