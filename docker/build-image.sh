#!/usr/bin/env bash
# Build the sandbox image offline from Debian's packages; all output goes to stderr.
#   docker/build-image.sh [IMAGE]        IMAGE (or $IMAGE) defaults to safe-code-sandbox:latest
# Environment:
#   BASE=python:3.11-slim   build FROM an official Python image instead (needs a registry)
#   SCS_IMAGE_REBUILD=1     rebuild even when an image with the same input hash exists
#                           (also re-runs mmdebstrap, picking up Debian's security updates)
# The image is labelled io.scs.image-inputs=<sha256 of its inputs>; with that label already on
# IMAGE, nothing is done, so a second call takes well under a second.
set -euo pipefail
exec 1>&2

here="$(cd "$(dirname "$0")" && pwd)"
image="${1:-${IMAGE:-safe-code-sandbox:latest}}"
suite=bookworm
include=python3
label=io.scs.image-inputs
export DOCKER_BUILDKIT=0  # the legacy builder needs no buildx plugin; Debian's docker.io has none

log() { printf 'build-image: %s\n' "$*"; }

# mmdebstrap options: drop documentation, man pages and translations; mmdebstrap itself removes
# apt's lists and caches, and the essential variant installs no apt at all.
mmdebstrap_args=(
  --variant=essential "--include=$include"
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/lintian/*'
)

base_hash="$(printf '%s\n' "$suite" "${mmdebstrap_args[@]}" | sha256sum | cut -c1-16)"
inputs_hash="$(
  {
    cat "$here/Dockerfile" "$here/launcher.py"
    printf '%s\n' "base=${BASE:-debian:$base_hash}"
  } | sha256sum | cut -c1-32
)"

current="$(docker image inspect -f "{{index .Config.Labels \"$label\"}}" "$image" 2>/dev/null || true)"
if [[ "$current" == "$inputs_hash" && "${SCS_IMAGE_REBUILD:-0}" != 1 ]]; then
  log "$image is up to date ($label=$inputs_hash)"
  exit 0
fi
old_id="$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"

base="${BASE:-}"
if [[ -z "$base" ]]; then
  base="safe-code-sandbox-base:$suite-$base_hash"
  if [[ "${SCS_IMAGE_REBUILD:-0}" == 1 ]] || ! docker image inspect "$base" >/dev/null 2>&1; then
    command -v mmdebstrap >/dev/null || { log "mmdebstrap is missing (apt-get install mmdebstrap)"; exit 1; }
    log "bootstrapping $suite with mmdebstrap into $base"
    started=$SECONDS
    work="$(mktemp -d /var/tmp/scs-rootfs.XXXXXX)"
    trap 'rm -rf "$work"' EXIT
    # Through a file, not a pipe: a failed bootstrap must never be imported as a base image.
    mmdebstrap --quiet "${mmdebstrap_args[@]}" "$suite" "$work/rootfs.tar"
    docker import "$work/rootfs.tar" "$base" >/dev/null
    rm -rf "$work"
    log "base image $base ready in $((SECONDS - started)) s"
  fi
fi

log "building $image FROM $base"
build_log="$(mktemp)"
if ! docker build --force-rm --build-arg "BASE=$base" --label "$label=$inputs_hash" -t "$image" "$here" \
    >"$build_log" 2>&1; then
  log "docker build failed:"
  tail -n 30 "$build_log"
  rm -f "$build_log"
  exit 1
fi
rm -f "$build_log"

new_id="$(docker image inspect -f '{{.Id}}' "$image")"
if [[ -n "$old_id" && "$old_id" != "$new_id" ]]; then
  docker image rm "$old_id" >/dev/null 2>&1 || true
fi
log "$image built ($label=$inputs_hash)"
