#!/usr/bin/env bash
# Runs every *.test.ts with Node's test runner against the real Redis and Docker engine that
# scripts/setup.sh provides. Files run one at a time: many start containers, and the machine is small.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(find apps libs test -name '*.test.ts' -not -path '*/node_modules/*' | sort)
# SANDGATE_TEST_ONLY / SANDGATE_TEST_SKIP: extended regexes of the paths to keep / to leave out (the Kubernetes pass
# and scripts/test-on-node.sh run a stated part).
if [[ -n ${SANDGATE_TEST_ONLY:-} ]]; then
  mapfile -t files < <(printf '%s\n' "${files[@]}" | grep -E -- "$SANDGATE_TEST_ONLY")
fi
if [[ -n ${SANDGATE_TEST_SKIP:-} ]]; then
  mapfile -t files < <(printf '%s\n' "${files[@]}" | grep -Ev -- "$SANDGATE_TEST_SKIP")
fi
if [ "${#files[@]}" -eq 0 ]; then echo "no test files found" >&2; exit 1; fi
echo "==> ${#files[@]} test files${SANDGATE_TEST_BACKEND:+ on the ${SANDGATE_TEST_BACKEND} backend}"
exec node --import tsx --test --test-concurrency=1 --test-timeout=600000 \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=./scripts/file-times.mjs --test-reporter-destination=stdout "$@" "${files[@]}"
