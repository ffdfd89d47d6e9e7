#!/usr/bin/env bash
# Installs n8n 2.8.4 (the last whose engines allow Node 20) into DIR for the n8n tests, with its SQLite binding built
# here (its install script would fetch a prebuilt one from the network; node-gyp builds it from the bundled source).
# Writes its exit status to DIR.status when it ends; scripts/setup.sh --for-tests runs it in the background (DIR.pid,
# log in DIR.log) and test/n8n/ waits for that status.
#
#   bash scripts/install-n8n.sh DIR
set -uo pipefail
dir="${1:?usage: install-n8n.sh DIR}"
rm -f "$dir.status"
mkdir -p "$dir"
printf '%s\n' '{ "name": "sandgate-n8n-test", "private": true, "dependencies": { "n8n": "2.8.4" },' \
  '  "overrides": { "xlsx": "0.18.5" } }' > "$dir/package.json"
cd "$dir" \
  && npm install --no-audit --no-fund --ignore-scripts --loglevel=error </dev/null \
  && npm rebuild sqlite3 --loglevel=error </dev/null
status=$?
if ((status != 0)); then
  echo "install-n8n.sh: failed (npm install in $dir; its SQLite binding needs g++ and make)" >&2
fi
echo "$status" > "$dir.status"
exit "$status"
