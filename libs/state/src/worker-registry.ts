import type { Redis } from 'ioredis';
import type { BackendState } from '@sandgate/contracts';
import type { Keys } from './keys.ts';

/**
 * A worker stamps its heartbeat every 5 s; one seen within this window is alive, for /readyz and for
 * keeping its warm pool through sweeps.
 */
export const WORKER_ALIVE_MS = 15_000;

/** What a worker publishes with each heartbeat: the numbers only it knows, for /metrics and /v1/system/stats. */
export interface WorkerSnapshot {
  /** Runs it takes at once, and runs it holds now. */
  concurrency: number;
  running: number;
  /** Warm sandboxes ready in its pool. */
  pool_ready: number;
  /** Warm sandboxes ready in its templates' pools, by template (absent: none). */
  template_pools_ready?: Record<string, number>;
  /** Session sandboxes running on its engine, and that engine's id: workers of one engine report the same ones. */
  session_sandboxes: number;
  engine: string;
  /** Its backend (`docker`, `kubernetes`), that backend's state (`unknown` from a worker that says none), and why. */
  backend: string;
  backend_state: BackendState;
  backend_reason?: string;
  /** False while it leaves runs to other workers because its own backend is unusable (absent: takes runs). */
  taking_runs?: boolean;
}

export interface WorkerInfo extends WorkerSnapshot {
  id: string;
  last_heartbeat_at: string;
}

/** Worker liveness, for /readyz: each worker stamps its id with the time every few seconds, and its snapshot. */
export class WorkerRegistry {
  readonly #redis: Redis;
  readonly #k: Keys;
  constructor(redis: Redis, k: Keys) {
    this.#redis = redis;
    this.#k = k;
  }

  async beat(workerId: string, snapshot?: WorkerSnapshot): Promise<void> {
    const m = this.#redis.multi().zadd(this.#k.workers(), Date.now(), workerId);
    if (snapshot) m.hset(this.#k.workerStats(), workerId, JSON.stringify(snapshot));
    await m.exec();
  }

  async leave(workerId: string): Promise<void> {
    await this.#redis.multi().zrem(this.#k.workers(), workerId).hdel(this.#k.workerStats(), workerId).exec();
  }

  /** The workers seen within `withinMs`, with their latest snapshot (zeros for one that published none yet). */
  async list(withinMs: number): Promise<WorkerInfo[]> {
    const seen = await this.#redis.zrangebyscore(this.#k.workers(), Date.now() - withinMs, '+inf', 'WITHSCORES');
    const ids = seen.filter((_, i) => i % 2 === 0);
    const snapshots = ids.length > 0 ? await this.#redis.hmget(this.#k.workerStats(), ...ids) : [];
    return ids.map((id, i) => ({
      concurrency: 0,
      running: 0,
      pool_ready: 0,
      session_sandboxes: 0,
      engine: '',
      backend: '',
      backend_state: 'unknown' as const,
      ...(snapshots[i] ? (JSON.parse(snapshots[i]!) as WorkerSnapshot) : {}),
      id,
      last_heartbeat_at: new Date(Number(seen[i * 2 + 1])).toISOString(),
    }));
  }

  /** Ids of the workers seen within `withinMs`. */
  async aliveIds(withinMs: number): Promise<Set<string>> {
    return new Set(await this.#redis.zrangebyscore(this.#k.workers(), Date.now() - withinMs, '+inf'));
  }

  /** The workers seen within `withinMs`, as list() gives them; forgets those not seen for an hour. */
  async live(withinMs: number): Promise<WorkerInfo[]> {
    const gone = await this.#redis.zrangebyscore(this.#k.workers(), '-inf', Date.now() - withinMs - 3_600_000);
    if (gone.length > 0) {
      await this.#redis
        .multi()
        .zrem(this.#k.workers(), ...gone)
        .hdel(this.#k.workerStats(), ...gone)
        .exec();
    }
    return this.list(withinMs);
  }
}
