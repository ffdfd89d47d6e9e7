#!/usr/bin/env bash
# Build the sandgate runtime image without any container registry.
#
#   bash images/runtime/build.sh            (from any directory)
#
# 1. If the image already exists and was built from this very Dockerfile and agent/
#    (label org.sandgate.runtime.dockerfile-sha256), do nothing.
# 2. Unless SANDGATE_BASE_IMAGE names another base (e.g. debian:bookworm-slim,
#    pulled from a registry), make sure sandgate/base:bookworm exists: a
#    `debootstrap --variant=minbase bookworm` rootfs from the Debian mirror that
#    this machine's apt already uses, `docker import`ed.
# 3. docker build the Dockerfile on top of that base.
#
# Environment:
#   SANDGATE_IMAGE          image to build            (default sandgate/runtime:1)
#   SANDGATE_BASE_IMAGE     base image to build FROM; skips debootstrap
#   SANDGATE_DEBIAN_MIRROR  mirror URL for debootstrap (default: read from apt sources)
#   SANDGATE_FORCE_REBUILD  1 = rebuild even when the image is up to date
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DOCKERFILE="$HERE/Dockerfile"
IMAGE="${SANDGATE_IMAGE:-sandgate/runtime:1}"
DEFAULT_BASE="sandgate/base:bookworm"
BASE="${SANDGATE_BASE_IMAGE:-$DEFAULT_BASE}"
SUITE="bookworm"
SHA_LABEL="org.sandgate.runtime.dockerfile-sha256"

log() { printf '==> [runtime image] %s\n' "$*"; }
die() { printf 'error: [runtime image] %s\n' "$*" >&2; exit 1; }

# Print the URL of the Debian mirror serving "$SUITE main" according to apt's
# configuration: one-line sources (sources.list, sources.list.d/*.list) and
# deb822 sources (sources.list.d/*.sources). First match wins.
find_debian_mirror() {
  local files=()
  [[ -f /etc/apt/sources.list ]] && files+=(/etc/apt/sources.list)
  local f
  for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] && files+=("$f")
  done
  ((${#files[@]})) || return 1
  awk -v suite="$SUITE" '
    function usable(uri) { return uri ~ /^(https?|file):/ }
    function has(list, word,   n, a, i) {
      n = split(list, a, /[ \t]+/)
      for (i = 1; i <= n; i++) if (a[i] == word) return 1
      return 0
    }
    function flush(   n, u, i) {   # end of a deb822 stanza
      if (instanza && tolower(f["enabled"]) != "no" && has(f["types"], "deb") \
          && has(f["suites"], suite) && has(f["components"], "main")) {
        n = split(f["uris"], u, /[ \t]+/)
        for (i = 1; i <= n; i++) if (usable(u[i])) { print u[i]; found = 1; exit }
      }
      f["enabled"] = f["types"] = f["suites"] = f["components"] = f["uris"] = ""
      key = ""; instanza = 0
    }
    FNR == 1 { flush(); deb822 = (FILENAME ~ /\.sources$/) }
    deb822 {
      if ($0 ~ /^[ \t]*#/) next
      if ($0 ~ /^[ \t]*$/) { flush(); next }
      if ($0 ~ /^[ \t]/) { if (key != "") f[key] = f[key] " " $0; next }   # continuation line
      k = $0; sub(/:.*/, "", k); v = $0; sub(/^[^:]*:[ \t]*/, "", v)
      key = tolower(k); f[key] = v; instanza = 1; next
    }
    {
      line = $0; sub(/#.*/, "", line)
      gsub(/\[[^]]*\]/, " ", line)             # [ options ]
      n = split(line, w, /[ \t]+/)
      j = 0; for (i = 1; i <= n; i++) if (w[i] != "") t[++j] = w[i]
      if (j >= 4 && t[1] == "deb" && t[3] == suite && usable(t[2])) {
        for (i = 4; i <= j; i++) if (t[i] == "main") { print t[2]; found = 1; exit }
      }
    }
    END { if (!found) flush() }
  ' "${files[@]}" | head -n1 | grep .
}

command -v docker >/dev/null 2>&1 || die "docker is not installed (run scripts/setup.sh, or: apt-get install docker.io)"
docker info >/dev/null 2>&1 || die "cannot talk to the Docker engine (is dockerd running, may this user use /var/run/docker.sock?)"
[[ -f $DOCKERFILE ]] || die "missing $DOCKERFILE"

# One build at a time on this machine (two test runs may call setup at once);
# the second one then finds the image up to date.
lockfile="${TMPDIR:-/tmp}/sandgate-runtime-build.lock"
if command -v flock >/dev/null 2>&1 && { [[ -w $lockfile ]] || [[ ! -e $lockfile ]]; }; then
  exec 9>>"$lockfile"
  if ! flock -n 9; then
    log "another build of the runtime image is running; waiting for it"
    flock 9
  fi
fi

# The image depends on the Dockerfile and on what it COPYs (agent/): a change to either rebuilds it.
sha="$(cd "$HERE" && { sha256sum Dockerfile; find agent -type f | LC_ALL=C sort | xargs -r sha256sum; } | sha256sum | cut -d' ' -f1)"
old_id="$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
if [[ -n $old_id && ${SANDGATE_FORCE_REBUILD:-0} != 1 ]]; then
  built_from="$(docker image inspect --format "{{ index .Config.Labels \"$SHA_LABEL\" }}" "$IMAGE" 2>/dev/null || true)"
  if [[ $built_from == "$sha" ]]; then
    log "$IMAGE is up to date (Dockerfile + agent sha256 ${sha:0:12})"
    exit 0
  fi
  log "$IMAGE exists but was built from another Dockerfile or agent (${built_from:0:12} != ${sha:0:12}): rebuilding"
fi

# --- base image -----------------------------------------------------------
workdir=""
unmount_under() {   # debootstrap mounts /proc, /sys (and maybe /dev) in the target
  local m
  while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(
    awk -v r="$1" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r)
  ! awk -v r="$1" '$2 == r || index($2, r "/") == 1 { found = 1 } END { exit !found }' /proc/mounts
}
cleanup() {
  [[ -n $workdir && -d $workdir ]] || return 0
  if unmount_under "$workdir"; then
    rm -rf --one-file-system "$workdir"
  else
    printf 'warning: [runtime image] %s still has mounts; not removing it\n' "$workdir" >&2
  fi
  workdir=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -n ${SANDGATE_BASE_IMAGE:-} ]]; then
  log "using base image $BASE (SANDGATE_BASE_IMAGE; debootstrap skipped)"
elif docker image inspect "$BASE" >/dev/null 2>&1; then
  log "base image $BASE present"
else
  [[ $(id -u) == 0 ]] || die "$BASE is missing and building it with debootstrap needs root (or set SANDGATE_BASE_IMAGE=debian:bookworm-slim to use a registry)"
  command -v debootstrap >/dev/null 2>&1 || die "$BASE is missing and debootstrap is not installed (apt-get install debootstrap), or set SANDGATE_BASE_IMAGE"
  mirror="${SANDGATE_DEBIAN_MIRROR:-}"
  if [[ -z $mirror ]]; then
    mirror="$(find_debian_mirror)" || die "no apt source serves '$SUITE main' in /etc/apt/sources.list{,.d/*.list,.d/*.sources}; set SANDGATE_DEBIAN_MIRROR=<url>"
  fi
  workdir="$(mktemp -d "${TMPDIR:-/var/tmp}/sandgate-base.XXXXXX")"
  rootfs="$workdir/rootfs"
  log "building $BASE: debootstrap --variant=minbase $SUITE from $mirror"
  t0=$SECONDS
  if ! debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >"$workdir/debootstrap.out" 2>&1; then
    tail -n 20 "$workdir/debootstrap.out" >&2 || true
    if [[ -f $rootfs/debootstrap/debootstrap.log ]]; then tail -n 20 "$rootfs/debootstrap/debootstrap.log" >&2; fi
    die "debootstrap failed"
  fi
  unmount_under "$rootfs" || die "mounts left under $rootfs after debootstrap"
  # No package cache, logs or device nodes in the image (Docker provides /dev).
  # debootstrap already wrote etc/apt/sources.list: "deb $mirror $SUITE main".
  rm -rf --one-file-system \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/* "$rootfs"/tmp/* \
    "$rootfs"/dev/* "$rootfs"/proc/* "$rootfs"/sys/* "$rootfs"/run/*
  : >"$rootfs/etc/hostname"
  log "debootstrap done in $((SECONDS - t0))s ($(head -n1 "$rootfs/etc/apt/sources.list")); importing into Docker"
  tar --numeric-owner -C "$rootfs" -c . \
    | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' \
        --message "debootstrap --variant=minbase $SUITE" \
        - "$BASE" >/dev/null
  cleanup
  log "base image $BASE: $(docker image inspect --format '{{.Size}}' "$BASE" | awk '{printf "%.0f MB", $1/1e6}')"
fi

# --- runtime image ----------------------------------------------------------
# The docker CLI defaults to BuildKit and then needs the buildx plugin; without
# it, use the classic builder (which handles this Dockerfile just as well).
if [[ -z ${DOCKER_BUILDKIT:-} ]] && ! docker buildx version >/dev/null 2>&1; then
  export DOCKER_BUILDKIT=0
fi
log "building $IMAGE FROM $BASE (this takes a few minutes the first time)"
t0=$SECONDS
docker build \
  --build-arg "BASE=$BASE" \
  --label "$SHA_LABEL=$sha" \
  --label "org.sandgate.runtime.base=$BASE" \
  -t "$IMAGE" \
  "$HERE"

new_id="$(docker image inspect --format '{{.Id}}' "$IMAGE")"
if [[ -n $old_id && $old_id != "$new_id" ]]; then
  # The previous build is now untagged: drop it unless something still uses it.
  if [[ -z $(docker image inspect --format '{{join .RepoTags ""}}' "$old_id" 2>/dev/null) ]]; then
    docker image rm "$old_id" >/dev/null 2>&1 || true
  fi
fi
log "built $IMAGE in $((SECONDS - t0))s: $(docker image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}')"
