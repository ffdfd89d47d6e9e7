#!/usr/bin/env bash
# Runs every *.test.ts with Node's test runner against the real Redis and Docker engine that
# scripts/setup.sh provides.
set -euo pipefail
cd "$(dirname "$0")/.."
# SANDGATE_TEST_DIRS: where to look (default: everywhere); each workspace's `npm test` (run by turbo) names its own
# folder, and the root's `npm test` names test/ after them.
read -r -a dirs <<< "${SANDGATE_TEST_DIRS:-apps libs test}"
mapfile -t files < <(find "${dirs[@]}" -name '*.test.ts' -not -path '*/node_modules/*' | sort)
# SANDGATE_TEST_ONLY / SANDGATE_TEST_SKIP: extended regexes of the paths to keep / to leave out (the Kubernetes pass
# and scripts/test-on-node.sh run a stated part).
if [[ -n ${SANDGATE_TEST_ONLY:-} ]]; then
  mapfile -t files < <(printf '%s\n' "${files[@]}" | grep -E -- "$SANDGATE_TEST_ONLY")
fi
if [[ -n ${SANDGATE_TEST_SKIP:-} ]]; then
  mapfile -t files < <(printf '%s\n' "${files[@]}" | grep -Ev -- "$SANDGATE_TEST_SKIP")
fi
if [ "${#files[@]}" -eq 0 ]; then
  # Under a filter, a folder may hold none of the files asked for (each workspace's tests run on their own).
  if [[ -n ${SANDGATE_TEST_DIRS:-} && -n ${SANDGATE_TEST_ONLY:-}${SANDGATE_TEST_SKIP:-} ]]; then
    echo "==> none of the test files under ${SANDGATE_TEST_DIRS} is asked for"
    exit 0
  fi
  echo "no test files found" >&2
  exit 1
fi

# Files run SANDGATE_TEST_CONCURRENCY at a time (default 2): each test has its own Redis prefix, data directory,
# deployment label and ports, so they do not see each other. The fault tests stop, restart or fill a Redis, a Docker
# engine or a filesystem of their own, and some measure how soon sandgate notices: they run one at a time, after the
# others (npm run test:all runs them beside the Docker pass, in its second lane).
concurrency="${SANDGATE_TEST_CONCURRENCY:-2}"
ALONE='^test/faults/'
mapfile -t alone < <(printf '%s\n' "${files[@]}" | grep -E -- "$ALONE" || true)
mapfile -t shared < <(printf '%s\n' "${files[@]}" | grep -Ev -- "$ALONE" || true)
# The slowest files first (test/slow-first.txt), the rest in path order.
first_first() {   # reads paths, prints those listed in test/slow-first.txt first, in its order
  awk 'NR == FNR { if ($0 !~ /^#/ && $0 != "") rank[$0] = FNR; next } { print ($0 in rank ? rank[$0] : 100000), $0 }' \
    test/slow-first.txt - | sort -n -s -k1,1 | cut -d' ' -f2-
}
if [[ ${#shared[@]} -gt 0 ]]; then mapfile -t shared < <(printf '%s\n' "${shared[@]}" | first_first); fi

# The files are compiled once, together, before the runner starts (scripts/build-tests.mjs: esbuild, the workspace
# packages bundled, source maps on), and each runs as plain JavaScript: under `--import tsx` every test process
# compiled the same sources again. The compiled copy lives in .cache/tests/ while this script runs;
# SANDGATE_TEST_TSX=1 runs the sources under tsx instead.
loader=(--enable-source-maps)
if [[ ${SANDGATE_TEST_TSX:-} == 1 ]]; then
  loader=(--import tsx)
else
  mkdir -p .cache/tests
  build="$(mktemp -d .cache/tests/run.XXXXXX)"
  trap 'rm -rf "$build"' EXIT
  node scripts/build-tests.mjs "$build" "${files[@]}"
  export SANDGATE_TEST_BUILD_DIR="$build"   # scripts/file-times.mjs names the sources
fi
runner() {   # runner CONCURRENCY FILE...
  local n=$1; shift
  if [[ -n ${build:-} ]]; then set -- "${@/#/$build/}"; set -- "${@/%/.mjs}"; fi
  node "${loader[@]}" --test --test-concurrency="$n" --test-timeout=600000 \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=./scripts/file-times.mjs --test-reporter-destination=stdout "${args[@]}" "$@"
}
args=("$@")
on="${SANDGATE_TEST_BACKEND:+ on the ${SANDGATE_TEST_BACKEND} backend}"
rc=0
if [ "${#shared[@]}" -gt 0 ]; then
  echo "==> ${#shared[@]} test files${on}, ${concurrency} at a time"
  runner "$concurrency" "${shared[@]}" || rc=$?
fi
if [ "${#alone[@]}" -gt 0 ]; then
  echo "==> ${#alone[@]} test files${on} that run alone"
  runner 1 "${alone[@]}" || rc=$?
fi
exit "$rc"
