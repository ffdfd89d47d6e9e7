import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/**
 * What each tenant stores: the bytes of every session it has files in, as last measured (after an upload, a run, a
 * delete), in one Redis hash per tenant. Its sum is what SANDGATE_TENANT_STORAGE_BYTES bounds. A measure replaces the
 * session's figure rather than adding to it, so a missed update is corrected by the next one instead of drifting.
 */
export class StorageLedger {
  readonly #redis: Redis;
  readonly #k: Keys;
  constructor(redis: Redis, k: Keys) {
    this.#redis = redis;
    this.#k = k;
  }

  async record(tenant: string, sessionId: string, bytes: number): Promise<void> {
    await this.#redis.hset(this.#k.tenantStorage(tenant), sessionId, String(bytes));
  }

  /**
   * What is kept beside a session's files, counted apart: `<id>/state` (its saved interpreter), `<id>/snapshot/<name>`.
   * 0 bytes drops the entry.
   */
  async recordBeside(tenant: string, sessionId: string, what: string, bytes: number): Promise<void> {
    const field = `${sessionId}/${what}`;
    if (bytes > 0) await this.#redis.hset(this.#k.tenantStorage(tenant), field, String(bytes));
    else await this.#redis.hdel(this.#k.tenantStorage(tenant), field);
  }

  /** The session is gone (deleted, expired): its files and all that was kept beside them. */
  async forget(tenant: string, sessionId: string): Promise<void> {
    const fields = await this.#redis.hkeys(this.#k.tenantStorage(tenant));
    const gone = fields.filter((f) => f === sessionId || f.startsWith(`${sessionId}/`));
    if (gone.length > 0) await this.#redis.hdel(this.#k.tenantStorage(tenant), ...gone);
  }

  /** Bytes the tenant stores over all its sessions. */
  async total(tenant: string): Promise<number> {
    const values = await this.#redis.hvals(this.#k.tenantStorage(tenant));
    return values.reduce((sum, v) => sum + (Number(v) || 0), 0);
  }
}
