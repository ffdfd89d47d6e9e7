import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/**
 * What each tenant stores: the bytes of every session it has files in, as last measured (after an upload, a run, a
 * delete), in one Redis hash per tenant. Its sum is what SANDGATE_TENANT_STORAGE_BYTES bounds. A measure replaces the
 * session's figure rather than adding to it, so a missed update is corrected by the next one instead of drifting.
 */
export class StorageLedger {
  constructor(
    private readonly redis: Redis,
    private readonly k: Keys,
  ) {}

  async record(tenant: string, sessionId: string, bytes: number): Promise<void> {
    await this.redis.hset(this.k.tenantStorage(tenant), sessionId, String(bytes));
  }

  /** The session's files are gone (deleted, expired). */
  async forget(tenant: string, sessionId: string): Promise<void> {
    await this.redis.hdel(this.k.tenantStorage(tenant), sessionId);
  }

  /** Bytes the tenant stores over all its sessions. */
  async total(tenant: string): Promise<number> {
    const values = await this.redis.hvals(this.k.tenantStorage(tenant));
    return values.reduce((sum, v) => sum + (Number(v) || 0), 0);
  }
}
