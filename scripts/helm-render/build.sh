#!/usr/bin/env bash
# Builds helm-render (main.go) with Debian's Go toolchain and Go libraries, offline, into .cache/helm-render.
# Needs the Debian packages golang-go, golang-github-masterminds-sprig-dev and golang-k8s-sigs-yaml-dev
# (scripts/setup.sh installs them). Rebuilds only when main.go is newer than the binary. Prints the binary's path.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/../../.cache/helm-render"
src=/usr/share/gocode/src
if [[ -x $out && $out -nt $here/main.go ]]; then echo "$out"; exit 0; fi
command -v go >/dev/null || { echo "helm-render: go is missing (apt-get install golang-go)" >&2; exit 1; }
[[ -d $src/github.com/Masterminds/sprig && -d $src/sigs.k8s.io/yaml ]] || {
  echo "helm-render: Go libraries missing (apt-get install golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev)" >&2; exit 1; }
gopath="$(mktemp -d)"
trap 'rm -rf "$gopath"' EXIT
# Debian ships GOPATH-layout sources; Sprig imports semver by its module path (…/semver/v3), so that path is
# linked to the same directory. Everything else is used as Debian installed it.
mkdir -p "$gopath/src/github.com/Masterminds/semver" "$gopath/src/helm-render"
for d in "$src"/*; do [[ $(basename "$d") == github.com ]] || ln -s "$d" "$gopath/src/$(basename "$d")"; done
for d in "$src"/github.com/*; do [[ $(basename "$d") == Masterminds ]] || ln -s "$d" "$gopath/src/github.com/$(basename "$d")"; done
ln -s "$src/github.com/Masterminds/sprig" "$gopath/src/github.com/Masterminds/sprig"
ln -s "$src/github.com/Masterminds/goutils" "$gopath/src/github.com/Masterminds/goutils"
for f in "$src"/github.com/Masterminds/semver/*; do ln -s "$f" "$gopath/src/github.com/Masterminds/semver/"; done
ln -s "$src/github.com/Masterminds/semver" "$gopath/src/github.com/Masterminds/semver/v3"
cp "$here/main.go" "$gopath/src/helm-render/"
mkdir -p "$(dirname "$out")"
(cd "$gopath/src/helm-render" && GO111MODULE=off GOPATH="$gopath" GOCACHE="$gopath/cache" GOFLAGS= go build -o "$out.tmp" .)
mv "$out.tmp" "$out"
echo "$out"
