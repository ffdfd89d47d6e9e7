import type { Redis } from 'ioredis';
import type { StatsHistory, StatsPoint } from '@sandgate/contracts';
import type { Keys } from '@sandgate/state';
import type { SystemStatsReader } from './system-stats.ts';

const HOUR_MS = 3_600_000;

/**
 * The deployment's figures over the last hour, for the operator's charts: every interval one gateway (whichever first
 * claims that slot of time in Redis) samples /v1/system/stats into a capped list, so that the history has one point
 * per interval however many gateways run, and goes on when any of them stops.
 */
export class StatsHistorySampler {
  readonly #timer: NodeJS.Timeout;
  readonly #intervalMs: number;

  constructor(
    readonly redis: Redis,
    readonly k: Keys,
    readonly stats: SystemStatsReader,
    intervalSeconds: number,
    readonly onError: (err: unknown) => void,
  ) {
    this.#intervalMs = intervalSeconds * 1000;
    // A few ticks per slot: whichever gateway ticks first in a slot samples it.
    this.#timer = setInterval(() => void this.sample().catch(onError), this.#intervalMs / 3);
    this.#timer.unref();
  }

  /** Samples now if no gateway has sampled this slot of time yet; true when this one did. */
  async sample(now = Date.now()): Promise<boolean> {
    const slot = Math.floor(now / this.#intervalMs);
    const claimed = await this.redis.set(this.k.statsHistorySlot(slot), '1', 'PX', this.#intervalMs * 2, 'NX');
    if (claimed !== 'OK') return false;
    // Read afresh, leaving the view GET /v1/system/stats caches alone: a sample taken just before runs began would
    // otherwise answer for them for a second.
    const { stats } = await this.stats.readFresh();
    const ended = stats.executions;
    const point = {
      at: new Date(now).toISOString(),
      queued: stats.executions.queued,
      running: stats.executions.running,
      pool_hits: stats.pool.hits,
      pool_misses: stats.pool.misses,
      live_sessions: stats.sessions.live,
      ended_runs: ended.completed + ended.failed + ended.timeout + ended.cancelled + ended.error,
    };
    const capacity = Math.ceil(HOUR_MS / this.#intervalMs) + 1;
    await this.redis
      .multi()
      .lpush(this.k.statsHistory(), JSON.stringify(point))
      .ltrim(this.k.statsHistory(), 0, capacity - 1)
      .exec();
    return true;
  }

  /** The points of the last hour, oldest first, each with its runs per minute since the one before. */
  async read(now = Date.now()): Promise<StatsHistory> {
    const raw = await this.redis.lrange(this.k.statsHistory(), 0, -1);
    const stored = raw
      .map((j) => JSON.parse(j) as Omit<StatsPoint, 'runs_per_minute'>)
      .filter((p) => Date.parse(p.at) >= now - HOUR_MS)
      .reverse();
    const points = stored.map((p, i): StatsPoint => {
      const before = stored[i - 1];
      const minutes = before ? (Date.parse(p.at) - Date.parse(before.at)) / 60_000 : 0;
      // Counters start again when the deployment's are reset: no rate across that.
      const rate = before && minutes > 0 && p.ended_runs >= before.ended_runs;
      return {
        ...p,
        runs_per_minute: rate ? Math.round(((p.ended_runs - before.ended_runs) / minutes) * 10) / 10 : null,
      };
    });
    return { interval_seconds: this.#intervalMs / 1000, points };
  }

  close(): void {
    clearInterval(this.#timer);
  }
}
