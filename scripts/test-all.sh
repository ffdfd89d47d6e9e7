#!/usr/bin/env bash
# npm run test:all (and so CI): the set-up, every test, then bench:ci.
#
# The tests run in two lanes at once, because most of their time is spent waiting (on containers, Pods, browsers,
# timers) rather than computing, and the two lanes share nothing they change:
#   lane 1 (printed as is)   the workspaces' tests, then test/ on Docker (npm test's parts, but for the checks)
#   lane 2 (printed "[2] ")  typecheck and lint of the whole tree, test:kubernetes, test:node24, then the fault
#                            suite one file at a time (each fault test has a Redis, an engine or a filesystem of its
#                            own to break, never the shared ones)
# bench:ci runs last, alone: it measures. Every step runs even when an earlier one failed, so that one run shows every
# failure; the table at the end says which step failed and how long each took.
set -uo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
bash scripts/setup.sh --for-tests || exit $?

status_dir="$(mktemp -d "${TMPDIR:-/tmp}/sandgate-test-all.XXXXXX")"
trap 'rm -rf "$status_dir"' EXIT

step() {   # step NAME COMMAND...: runs it, and notes its exit status and time
  local name=$1 start=$SECONDS rc=0; shift
  echo "==> [${name}] $*"
  "$@" || rc=$?
  echo "$rc $((SECONDS - start))" > "$status_dir/$name"
  echo "==> [${name}] exit ${rc} after $((SECONDS - start)) s"
}

lane1() {
  step workspaces bash scripts/turbo.sh run test --concurrency=1
  step test-docker env SANDGATE_TEST_DIRS=test SANDGATE_TEST_SKIP='^test/(kubernetes|faults)/' bash scripts/run-tests.sh
}

lane2() {
  step checks bash scripts/turbo.sh run typecheck:root typecheck:web lint:root
  step test-kubernetes bash scripts/test-kubernetes.sh
  step test-node24 npm run -s test:node24
  step faults env SANDGATE_TEST_DIRS=test SANDGATE_TEST_ONLY='^test/faults/' bash scripts/run-tests.sh
}

# Lane 2's lines carry its mark; `sed -u` passes each line on as it comes, so a run that hangs shows where.
lane2 > >(sed -u 's/^/[2] /') 2>&1 &
lane2_pid=$!
lane1
wait "$lane2_pid"
step bench-ci npm run -s bench:ci

echo
echo "==> npm run test:all: $((SECONDS - t0)) s in all (set-up included)"
failed=0
for name in workspaces test-docker checks test-kubernetes test-node24 faults bench-ci; do
  read -r rc secs < "$status_dir/$name" 2>/dev/null || { rc='not run'; secs='-'; }
  printf '    %-16s %6s s   %s\n' "$name" "$secs" "$([[ $rc == 0 ]] && echo pass || echo "FAIL ($rc)")"
  [[ $rc == 0 ]] || failed=1
done
exit "$failed"
