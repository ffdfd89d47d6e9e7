import type { WorkerInfo } from '@sandgate/state';

/** Distinct reasons a not_ready detail names at most: a probe's answer stays short however many workers fail. */
const MAX_REASONS = 3;

export type Readiness = { ready: true; checks: Record<string, string> } | { ready: false; detail: string };

/**
 * Ready when Redis answers and at least one live worker's backend can run sandboxes. A live worker is not enough: one
 * whose engine is gone takes runs and fails each at once (`backend_unavailable`), so a deployment without a usable
 * backend must leave the load balancer's rotation. `redis` is `ok` or what went wrong with it.
 */
export function readiness(redis: string, workers: WorkerInfo[]): Readiness {
  const usable = workers.filter(canRun).length;
  if (redis === 'ok' && usable > 0) {
    return { ready: true, checks: { redis, workers: String(workers.length), workers_usable: String(usable) } };
  }
  const reasons = [...new Set(workers.filter((w) => !canRun(w)).map(reasonOf))];
  const shown = reasons.slice(0, MAX_REASONS).join('; ');
  const more = reasons.length > MAX_REASONS ? `; ${reasons.length - MAX_REASONS} more` : '';
  return {
    ready: false,
    detail:
      `redis: ${redis}; live workers: ${workers.length}, with a usable backend: ${usable}` +
      (shown ? ` (${shown}${more})` : ''),
  };
}

/**
 * A worker whose backend answered its last probe, or one that reports no backend at all: a worker of a release before
 * backend probes (during a rolling upgrade), or one whose first snapshot is not out yet, counts as it always did.
 */
function canRun(w: WorkerInfo): boolean {
  return w.backend_state === 'usable' || w.backend === '';
}

/** `docker: engine unreachable: connect ENOENT /var/run/docker.sock`. */
function reasonOf(w: WorkerInfo): string {
  const why = w.backend_reason ?? (w.backend_state === 'unknown' ? 'not probed yet' : 'unusable');
  return `${w.backend || 'backend'}: ${why}`;
}
