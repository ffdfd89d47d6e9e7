#!/usr/bin/env bash
# Turborepo as the npm scripts run it (npm run typecheck, lint, build, test): the workspace tasks of turbo.json,
# cached in .turbo/cache, and no telemetry.
set -euo pipefail
export TURBO_TELEMETRY_DISABLED=1
exec "$(dirname "$0")/../node_modules/.bin/turbo" "$@"
