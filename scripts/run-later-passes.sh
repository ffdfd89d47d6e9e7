#!/usr/bin/env bash
# The passes of `npm run test:all` after `npm test`: the Kubernetes pass (npm run test:kubernetes) and, beside it, the
# Node 24 pass (npm run test:node24, one file at a time), whose output is kept in a file and printed once it ends, so
# the two logs do not interleave. Side by side because the Node 24 pass is light (unit tests and the HTTP API) while
# the Kubernetes pass mostly waits on containers; one after the other they took ~7 minutes of CI's 30. Fails if
# either fails.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp "${TMPDIR:-/tmp}/sandgate-node24.XXXXXX")
trap 'rm -f "$log"' EXIT
SANDGATE_TEST_CONCURRENCY=1 npm run --silent test:node24 >"$log" 2>&1 </dev/null &
node24=$!
npm run test:kubernetes
k8s=$?
wait "$node24"
n24=$?
echo "==> the Node 24 pass (ran beside the Kubernetes pass; exit $n24):"
cat "$log"
[[ $k8s -eq 0 && $n24 -eq 0 ]]
