#!/usr/bin/env bash
# Installs Docker Compose v2 (pinned below) into $SANDGATE_CACHE_DIR/compose-<version>/docker-compose (default
# ~/.cache/sandgate, shared by every clone), and as this user's Docker CLI plugin (~/.docker/cli-plugins) when none
# is there, so that `docker compose` works. Prints the binary's path. Idempotent: a second run only checks.
#
# Debian bookworm has only Compose v1 (docker-compose 1.29, Python, end of life), and no registry this project
# reaches ships v2's binary, so v2 is built from its source: the Go module github.com/docker/compose/v2 at the pinned
# tag, from the Go module proxy, checked against the Go checksum database, built with its own go.mod and go.sum (a
# `go install` cannot: the module has exclude directives). Needs Go >= 1.24 (go on PATH or /usr/local/go); takes a
# few minutes of CPU the first time (docs/adr/0012-compose-images.md).
#
#   bash scripts/install-compose.sh
set -euo pipefail
VERSION=v2.40.3
MODULE=github.com/docker/compose/v2
cache="${SANDGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sandgate}"
bin="$cache/compose-$VERSION/docker-compose"

die() { printf 'error: [compose] %s\n' "$*" >&2; exit 1; }
log() { printf '==> [compose] %s\n' "$*" >&2; }

plugin() {   # the user's Docker CLI plugin, unless one is there already
  local dir="$HOME/.docker/cli-plugins"
  if [[ ! -e $dir/docker-compose ]]; then
    mkdir -p "$dir" && ln -s "$bin" "$dir/docker-compose" && log "linked $dir/docker-compose (docker compose)"
  fi
}

if [[ -x $bin ]] && [[ $("$bin" version --short 2>/dev/null) == "${VERSION#v}" ]]; then
  plugin
  echo "$bin"
  exit 0
fi

go=""
for candidate in "$(command -v go || true)" /usr/local/go/bin/go; do
  [[ -n $candidate && -x $candidate ]] || continue
  minor="$("$candidate" env GOVERSION | sed -nE 's/^go1\.([0-9]+).*/\1/p')"
  if [[ -n $minor ]] && ((minor >= 24)); then go="$candidate"; break; fi
done
[[ -n $go ]] || die "building Docker Compose $VERSION needs Go >= 1.24 (go on PATH or /usr/local/go/bin/go)"

# One build at a time on this machine.
mkdir -p "$cache"
exec 9>>"$cache/compose-$VERSION.lock"
flock 9
if [[ -x $bin ]] && [[ $("$bin" version --short 2>/dev/null) == "${VERSION#v}" ]]; then plugin; echo "$bin"; exit 0; fi

log "building Docker Compose $VERSION from the Go module $MODULE (the first time takes minutes)"
t0=$SECONDS
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0
src_dir="$("$go" mod download -json "$MODULE@$VERSION" | sed -nE 's/^\s*"Dir": "(.*)",?$/\1/p')"
[[ -d $src_dir ]] || die "go mod download $MODULE@$VERSION gave no source directory"
work="$(mktemp -d "${TMPDIR:-/tmp}/sandgate-compose.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp -r "$src_dir" "$work/src"
chmod -R u+w "$work/src"
mkdir -p "$(dirname "$bin")"
(cd "$work/src" && nice -n 10 "$go" build -trimpath -ldflags "-s -w -X $MODULE/internal.Version=$VERSION" \
  -o "$bin.tmp" ./cmd)
mv "$bin.tmp" "$bin"
log "built $("$bin" version) in $((SECONDS - t0))s"
plugin
echo "$bin"
