import type { Redis } from 'ioredis';
import type { Keys } from '@sandgate/state';

/** One JSON-RPC request of one MCP client session of one tenant. */
export interface CallRef {
  tenant: string;
  mcpSession: string;
  requestId: string | number;
}

const CANCELLED = 'cancelled';
/** How long a cancel that came before its run is remembered. */
const EARLY_CANCEL_TTL_S = 600;
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * Which execution each MCP tools/call in flight is running. MCP cancels a call with a notifications/cancelled
 * that comes in a POST of its own, possibly to another gateway replica, naming only the JSON-RPC request id: this
 * table, in Redis, maps (tenant, MCP session, request id) to the run, so any replica can cancel it. Entries go
 * when the call ends and expire anyway, so a client that never comes back leaves nothing behind.
 */
export class RunCancels {
  readonly #redis: Redis;
  readonly #k: Keys;
  readonly #ttlSeconds: number;
  constructor(redis: Redis, k: Keys, ttlSeconds: number) {
    this.#redis = redis;
    this.#k = k;
    this.#ttlSeconds = ttlSeconds;
  }

  #key({ tenant, mcpSession, requestId }: CallRef): string | null {
    const id = `${typeof requestId === 'number' ? 'n' : 's'}${String(requestId)}`;
    return REQUEST_ID.test(id) ? this.#k.mcpCall(tenant, mcpSession, id) : null;
  }

  /** Records the run of a call. True when the call was cancelled before its run existed: cancel the run now. */
  async attach(call: CallRef, executionId: string): Promise<boolean> {
    const key = this.#key(call);
    if (!key) return false;
    const before = await this.#redis.set(key, executionId, 'EX', this.#ttlSeconds, 'GET');
    return before === CANCELLED;
  }

  async detach(call: CallRef): Promise<void> {
    const key = this.#key(call);
    if (key) await this.#redis.del(key);
  }

  /** Marks the call cancelled; returns the execution it runs, if it has one yet. */
  async cancel(call: CallRef): Promise<string | null> {
    const key = this.#key(call);
    if (!key) return null;
    const before = await this.#redis.set(key, CANCELLED, 'EX', EARLY_CANCEL_TTL_S, 'GET');
    return before && before !== CANCELLED ? before : null;
  }
}
