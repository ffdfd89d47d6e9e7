#!/usr/bin/env bash
# npm run test:kubernetes: the backend's end-to-end tests (the list below) and test/kubernetes/ against the test
# cluster (scripts/start-kube.sh: the real kube-apiserver and kubelet; built once per machine by build-kube.sh).
# The cluster stays up afterwards for the next run (bash scripts/start-kube.sh --stop stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
env_lines="$(bash scripts/start-kube.sh)" || { echo "test:kubernetes: the test cluster did not start" >&2; exit 1; }
eval "$env_lines"
echo "==> test cluster ready in $((SECONDS - t0)) s"
# The end-to-end files whose behaviour the backend provides: runs, the pool, sessions, files, quotas, tools, services,
# networks, volumes, a lost worker, pause and resume, saved variables, snapshots, undo, terminals, live metrics. Files
# that test the gateway and the queue whatever runs the code (SSE, ?wait, queued runs, webhooks, polling, logs, scripts,
# slow clients, the generated client) run in npm test's Docker pass only.
E2E='reference-workflow|one-shots|worker-lost|files|storage-quota|session-sandboxes|pool-tenants|test-mode|tools'
E2E+='|services|network-modes|volumes|session-pause|session-restore|session-snapshots|session-undo|session-fork'
E2E+='|session-pause-bounds|session-idle-wait|session-quota-resume|services-resume-sweep|terminal|file-events'
E2E+='|session-metrics'
export SANDGATE_TEST_BACKEND=kubernetes
# Three files at a time: they spend most of their time waiting on Pods (the scheduler, the kubelet, containerd), so a
# third file shortens a pass (measured: 602 s at 3 against 677 s at 2, load average 7-16 from other work) and every
# test still passes on the 2-core machine. SANDGATE_TEST_CONCURRENCY overrides it.
export SANDGATE_TEST_CONCURRENCY="${SANDGATE_TEST_CONCURRENCY:-3}"
export SANDGATE_TEST_ONLY="^test/(($E2E)\\.test\\.ts|kubernetes/.*\\.test\\.ts)\$"
status=0
bash scripts/run-tests.sh "$@" || status=$?
echo "==> test:kubernetes took $((SECONDS - t0)) s"
exit "$status"
