#!/usr/bin/env bash
# Starts a Redis for sandgate on this machine, as BullMQ and sandgate need it:
#   - persistence: append-only file (fsync every second) in a data directory of its own, so queued runs,
#     results and sessions survive a restart;
#   - maxmemory-policy noeviction: BullMQ must never have a key evicted (a lost job or lock breaks the queue);
#   - bound to loopback only (127.0.0.1 and ::1), protected mode on.
#
#   bash scripts/start-redis.sh [PORT]        (setup.sh runs it when no Redis answers; default port 6379)
#
# Data directory: $SANDGATE_REDIS_DIR, else /var/lib/sandgate-redis/<port> as root, else
# ${XDG_STATE_HOME:-~/.local/state}/sandgate-redis/<port>. Its log is redis.log there. Stop it with
# `redis-cli -p PORT shutdown`; the next start reads the append-only file back.
set -euo pipefail
port="${1:-6379}"
[[ $port =~ ^[0-9]+$ ]] || { echo "error: port must be a number, got $port" >&2; exit 2; }
if [[ -n ${SANDGATE_REDIS_DIR:-} ]]; then dir="$SANDGATE_REDIS_DIR"
elif [[ $(id -u) == 0 ]]; then dir="/var/lib/sandgate-redis/$port"
else dir="${XDG_STATE_HOME:-$HOME/.local/state}/sandgate-redis/$port"
fi
mkdir -p "$dir"
chmod 700 "$dir"
redis-server --daemonize yes --port "$port" --bind '127.0.0.1 -::1' --protected-mode yes \
  --dir "$dir" --appendonly yes --appendfsync everysec --maxmemory-policy noeviction \
  --logfile "$dir/redis.log" --pidfile "$dir/redis.pid" </dev/null \
  || { echo "error: redis-server failed to start (see $dir/redis.log)" >&2; exit 1; }
for _ in $(seq 50); do
  [[ "$(redis-cli -p "$port" ping 2>/dev/null)" == PONG ]] && { echo "$dir"; exit 0; }
  sleep 0.2
done
echo "error: Redis does not answer PING on port $port; last lines of $dir/redis.log:" >&2
tail -n 20 "$dir/redis.log" >&2 || true
exit 1
