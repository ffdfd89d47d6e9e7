import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/**
 * The key that signs download URLs: the configured one, else one shared through Redis, created
 * once by whichever process asks first, so every gateway and worker replica signs alike.
 */
export async function signingKey(redis: Redis, k: Keys, configured: string | null): Promise<Buffer> {
  if (configured) return Buffer.from(configured, 'utf8');
  await redis.set(k.signingKey(), randomBytes(32).toString('hex'), 'NX');
  const key = await redis.get(k.signingKey());
  return Buffer.from(key!, 'hex');
}

/**
 * A worker stamps its heartbeat every 5 s; one seen within this window is alive, for /readyz and for
 * keeping its warm pool through sweeps.
 */
export const WORKER_ALIVE_MS = 15_000;

/** Worker liveness, for /readyz: each worker stamps its id with the time every few seconds. */
export class WorkerRegistry {
  constructor(private readonly redis: Redis, private readonly k: Keys) {}

  async beat(workerId: string): Promise<void> {
    await this.redis.zadd(this.k.workers(), Date.now(), workerId);
  }

  async leave(workerId: string): Promise<void> {
    await this.redis.zrem(this.k.workers(), workerId);
  }

  /** Ids of the workers seen within `withinMs`. */
  async aliveIds(withinMs: number): Promise<Set<string>> {
    return new Set(await this.redis.zrangebyscore(this.k.workers(), Date.now() - withinMs, '+inf'));
  }

  /** Workers seen within `withinMs`. */
  async alive(withinMs: number): Promise<number> {
    const since = Date.now() - withinMs;
    await this.redis.zremrangebyscore(this.k.workers(), '-inf', since - 3_600_000);
    return this.redis.zcount(this.k.workers(), since, '+inf');
  }
}
