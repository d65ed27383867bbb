#!/usr/bin/env bash
# Idempotent set-up shared by scripts/run and scripts/test: install what is missing (Debian
# packages), build with CMake, start a Docker engine when none answers, build the sandbox image
# when missing. Every line of output goes to stderr: stdout belongs to the MCP protocol.
#
# Environment:
#   SCS_SKIP_DOCKER=1    no Docker engine, image or Docker packages (fake backend only)
#   SCS_SKIP_BUILD=1     do not run CMake
#   SCS_WITH_RUNSC       gVisor: install Debian's runsc and register it as the Docker runtime
#                        "runsc" (--runtime runsc). auto (default): when apt offers the package;
#                        1: always (fail without it); 0: never
#   SCS_BUILD_DIR        build directory (default: build)
#   SCS_BUILD_TARGETS    CMake targets to build (default: all); scripts/run builds only the
#                        server and its plugins
#   SCS_BUILD_TYPE       CMake build type of a new build directory (default: RelWithDebInfo)
#   SCS_JOBS             parallel build jobs (default: nproc)
#   SCS_WITH_FUZZ=0      do not install clang and libFuzzer (./scripts/fuzz needs them)
#   IMAGE                the server's sandbox image (default: safe-code-sandbox:latest); when it
#                        names a flavour (safe-code-sandbox:minimal, :scientific, or :latest,
#                        which is scientific), that flavour is built too
#   SCS_IMAGE_FLAVOURS   image flavours to build (default: scientific), e.g. "scientific minimal"
set -euo pipefail
exec 1>&2 </dev/null

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SCS_BUILD_DIR:-$root/build}"
[[ "$build_dir" == /* ]] || build_dir="$root/$build_dir"
export DEBIAN_FRONTEND=noninteractive

log() { printf 'setup: %s\n' "$*"; }
want_docker() { [[ "${SCS_SKIP_DOCKER:-0}" != 1 ]]; }

# Whether runsc is still to be installed (see SCS_WITH_RUNSC).
runsc_to_install() {
  want_docker && ! command -v runsc >/dev/null || return 1
  case "${SCS_WITH_RUNSC:-auto}" in
    0) return 1 ;;
    1) return 0 ;;
    *) apt-cache show runsc >/dev/null 2>&1 ;;
  esac
}

is_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

install_missing_packages() {
  local wanted=(build-essential cmake pkg-config libpoco-dev libboost-dev prometheus-cpp-dev
                libboost-filesystem-dev libgtest-dev libgmock-dev googletest
                help2man curl
                # the Kubernetes API's Pod schema, against which the unit tests check the Pods
                # the kubernetes backend writes
                python3-kubernetes
                # kubeconfig files, for the kubernetes backend
                libyaml-cpp-dev
                # the launcher's own Python is linted in the unit tier, and its seccomp filter
                # tested there (the image has its own copy)
                python3-pyflakes python3-seccomp
                # pip resolves and installs the packages runs ask for (--wheelhouse,
                # --package-index), on the host; the tests build a C extension's wheel for them
                python3-pip python3-dev
                # egress (--egress-allow): wildcards refused on public suffixes, hosts in
                # their canonical ASCII form
                libpsl-dev publicsuffix libidn2-dev)
  # clang with libFuzzer for ./scripts/fuzz, which ./scripts/test runs.
  [[ "${SCS_WITH_FUZZ:-1}" == 0 ]] || wanted+=(clang libclang-rt-14-dev)
  # Node may come from elsewhere (nodesource, nvm): Debian's nodejs only when there is no node.
  command -v node >/dev/null || wanted+=(nodejs)
  command -v npm >/dev/null || wanted+=(npm)
  if want_docker; then
    # Any Docker engine will do (docker-ce included); Debian's docker.io only when none exists.
    command -v dockerd >/dev/null || wanted+=(docker.io)
    command -v mmdebstrap >/dev/null || wanted+=(mmdebstrap)
    ! runsc_to_install || wanted+=(runsc)
  fi
  local missing=() package
  for package in "${wanted[@]}"; do
    is_installed "$package" || missing+=("$package")
  done
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  apt-get update -q
  # With fresh package lists apt may offer runsc where it did not before.
  if [[ " ${missing[*]} " != *" runsc "* ]] && runsc_to_install; then
    missing+=(runsc)
  fi
  apt-get install -y -q --no-install-recommends "${missing[@]}"
}

build() {
  local jobs="${SCS_JOBS:-$(nproc)}"
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    log "configuring $build_dir"
    cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE="${SCS_BUILD_TYPE:-RelWithDebInfo}"
  fi
  local targets=()
  if [[ -n "${SCS_BUILD_TARGETS:-}" ]]; then
    read -r -a targets <<<"$SCS_BUILD_TARGETS"
    targets=(--target "${targets[@]}")
  fi
  log "building ${SCS_BUILD_TARGETS:-everything} in $build_dir (-j$jobs)"
  cmake --build "$build_dir" -j"$jobs" "${targets[@]}"
}

# Registers runsc with the engine when it is installed: merges into daemon.json, never clobbers.
# With it goes the engine's experimental mode, the only way Docker 20.10 offers checkpoints:
# sessions under runsc hibernate when idle through them (issue 46). Without runsc nothing
# would use them, so the mode stays as it is.
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
if config.get("runtimes", {}).get("runsc") != wanted or config.get("experimental") is not True:
    config.setdefault("runtimes", {})["runsc"] = wanted
    config["experimental"] = True
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
EOF
}

# The engine lists runtimes from daemon.json once it has read the file (at start or on SIGHUP).
wait_for_runsc() {
  local deadline=$((SECONDS + $1))
  until docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

wait_for_docker() {
  local deadline=$((SECONDS + $1))
  until docker info >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# A running engine reads "experimental" only when it starts. One that runs no container is
# restarted, and says so; one that does is left alone with a warning (sessions then end when idle
# instead of hibernating, as the server logs).
enable_experimental() {
  command -v runsc >/dev/null || return 0
  [[ "$(docker version --format '{{.Server.Experimental}}' 2>/dev/null)" != true ]] || return 0
  if [[ -n "$(docker ps -q 2>/dev/null)" ]]; then
    log "warning: the engine runs containers, so it is not restarted for its experimental mode" \
      "(checkpoints, for sessions that hibernate); restart it yourself to turn it on"
    return 0
  fi
  log "restarting the engine for its experimental mode (checkpoints: sessions under runsc" \
    "hibernate when idle)"
  if systemctl is-active --quiet docker 2>/dev/null; then
    systemctl restart docker
  else
    kill "$(cat /var/run/docker.pid)"
    local deadline=$((SECONDS + 30))
    while [[ -e /var/run/docker.pid ]] && ((SECONDS < deadline)); do sleep 0.2; done
    setsid nohup dockerd </dev/null >>/var/log/scs-dockerd.log 2>&1 9>&- &
  fi
  wait_for_docker 30 || log "warning: the engine did not answer within 30 s of its restart"
}

start_docker() {
  register_runsc
  if docker info >/dev/null 2>&1; then
    # A running engine reads the runtimes of daemon.json again on SIGHUP.
    if command -v runsc >/dev/null && ! wait_for_runsc 0; then
      log "runsc registered; reloading the engine's configuration"
      kill -HUP "$(cat /var/run/docker.pid)"
      wait_for_runsc 10 || log "warning: the engine does not list runsc after the reload"
    fi
    enable_experimental
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

# Builds each wanted flavour of the sandbox image (docker/build-image.sh does nothing for one that
# is up to date). Any other IMAGE is the operator's own and is not built.
build_images() {
  local flavours image="${IMAGE:-safe-code-sandbox:latest}"
  read -r -a flavours <<<"${SCS_IMAGE_FLAVOURS:-scientific}"
  if [[ "$image" == safe-code-sandbox:latest ]]; then
    flavours+=(scientific)
  elif [[ "$image" == safe-code-sandbox:* && -f "$root/docker/flavours/${image#*:}.debian" ]]; then
    flavours+=("${image#*:}")
  else
    log "IMAGE=$image is not a flavour of docker/flavours/; not built here"
  fi
  local flavour built=" "
  for flavour in "${flavours[@]}"; do
    [[ "$built" != *" $flavour "* ]] || continue
    "$root/docker/build-image.sh" "$flavour"
    built+="$flavour "
  done
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
    build_images
  fi
  log "ready in $((SECONDS - started)) s"
}

main "$@"
