import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { SystemStats } from '@sandgate/contracts';
import {
  DeploymentStats,
  WORKER_ALIVE_MS,
  WorkerRegistry,
  type CounterValue,
  type Keys,
  type StatsSnapshot,
  type WorkerInfo,
} from '@sandgate/state';

/** The JSON of /v1/system/stats, with what /metrics renders beside it. */
export interface DeploymentView {
  stats: SystemStats;
  counters: StatsSnapshot['counters'];
  histograms: StatsSnapshot['histograms'];
  workers: WorkerInfo[];
}

const ENDED = ['completed', 'failed', 'timeout', 'cancelled', 'error'] as const;
const sumWhere = (values: CounterValue[] | undefined, key: string, value: string) =>
  (values ?? []).filter((v) => v.labels[key] === value).reduce((n, v) => n + v.value, 0);

const sum = (xs: number[]) => xs.reduce((n, x) => n + x, 0);

/** Each template's pool figures: its events (counted with a `template` label) and its sandboxes ready now. */
function templatePools(
  pool: CounterValue[] | undefined,
  workers: { template_pools_ready?: Record<string, number> }[],
): SystemStats['pool']['templates'] {
  const out: SystemStats['pool']['templates'] = {};
  const of = (name: string) => (out[name] ??= { hits: 0, misses: 0, reused: 0, ready: 0 });
  const fields = { hit: 'hits', miss: 'misses', reuse: 'reused' } as const;
  for (const { labels, value } of pool ?? []) {
    const field = fields[labels.event as keyof typeof fields];
    if (labels.template && field) of(labels.template)[field] += value;
  }
  for (const w of workers)
    for (const [name, ready] of Object.entries(w.template_pools_ready ?? {})) of(name).ready += ready;
  return out;
}

/**
 * Reads the whole deployment's numbers from Redis: queue depth from BullMQ, runs and pool events from the
 * deployment's counters, gauges from the snapshots live workers and gateways publish with their heartbeats.
 * A reading younger than a second is reused, so one scrape costs one reading.
 */
export class SystemStatsReader {
  readonly #stats: DeploymentStats;
  readonly #workers: WorkerRegistry;
  #last: { at: number; view: Promise<DeploymentView> } | null = null;

  readonly #redis: Redis;
  readonly #k: Keys;
  readonly #queue: Queue;
  constructor(redis: Redis, k: Keys, queue: Queue) {
    this.#redis = redis;
    this.#k = k;
    this.#queue = queue;
    this.#stats = new DeploymentStats(redis, k);
    this.#workers = new WorkerRegistry(redis, k);
  }

  read(): Promise<DeploymentView> {
    if (this.#last && Date.now() - this.#last.at < 1000) return this.#last.view;
    const view = this.#read();
    this.#last = { at: Date.now(), view };
    view.catch(() => {
      this.#last = null;
    });
    return view;
  }

  /** The view now, bypassing (and leaving) the cache that read() keeps for a second. */
  readFresh(): Promise<DeploymentView> {
    return this.#read();
  }

  async #read(): Promise<DeploymentView> {
    const now = Date.now();
    const [queue, snapshot, workers, running, live, gateways] = await Promise.all([
      this.#queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized'),
      this.#stats.read(),
      this.#workers.list(WORKER_ALIVE_MS),
      this.#redis.scard(this.#k.running()),
      this.#redis.zcount(this.#k.sessionExpiry(), now, '+inf'),
      this.#redis.hgetall(this.#k.gatewayStats()),
    ]);
    const runs = snapshot.counters.get('executions');
    const pool = snapshot.counters.get('pool');
    // Workers that share an engine see the same session sandboxes: count each engine once.
    const perEngine = new Map<string, number>();
    for (const w of workers)
      perEngine.set(w.engine || w.id, Math.max(perEngine.get(w.engine || w.id) ?? 0, w.session_sandboxes));
    const beats = Object.entries(gateways).map(([id, j]) => ({
      id,
      ...(JSON.parse(j) as { at: number; sse: number }),
    }));
    const sse = beats.filter((g) => g.at >= now - WORKER_ALIVE_MS).reduce((n, g) => n + g.sse, 0);
    // A gateway killed without a goodbye leaves its entry: gone after an hour, as a worker's does.
    const gone = beats.filter((g) => g.at < now - 3_600_000).map((g) => g.id);
    if (gone.length > 0) await this.#redis.hdel(this.#k.gatewayStats(), ...gone);
    const n = (c: string) => queue[c] ?? 0;
    const stats: SystemStats = {
      generated_at: new Date(now).toISOString(),
      queue: { waiting: n('waiting'), active: n('active'), delayed: n('delayed'), prioritized: n('prioritized') },
      executions: {
        queued: n('waiting') + n('delayed') + n('prioritized'),
        running,
        ...(Object.fromEntries(ENDED.map((state) => [state, sumWhere(runs, 'state', state)])) as Record<
          (typeof ENDED)[number],
          number
        >),
      },
      pool: {
        hits: sumWhere(pool, 'event', 'hit'),
        misses: sumWhere(pool, 'event', 'miss'),
        reused: sumWhere(pool, 'event', 'reuse'),
        ready: workers.reduce((s, w) => s + w.pool_ready + sum(Object.values(w.template_pools_ready ?? {})), 0),
        templates: templatePools(pool, workers),
      },
      sessions: { live, sandboxes: [...perEngine.values()].reduce((s, x) => s + x, 0) },
      sse_subscribers: sse,
      workers: workers.map((w) => ({
        id: w.id,
        last_heartbeat_at: w.last_heartbeat_at,
        concurrency: w.concurrency,
        running: w.running,
        taking_runs: w.taking_runs ?? true,
        backend: {
          name: w.backend,
          state: w.backend_state,
          ...(w.backend_reason !== undefined ? { reason: w.backend_reason } : {}),
        },
      })),
    };
    return { stats, counters: snapshot.counters, histograms: snapshot.histograms, workers };
  }
}
