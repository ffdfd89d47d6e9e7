import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/** What a transfer token lets its bearer do: read and write the files of one session, for one execution. */
export interface TransferGrant {
  execution_id: string;
  session_id: string;
  tenant: string;
}

const hashOf = (token: string): string => createHash('sha256').update(token).digest('hex');

/**
 * Short-lived bearer tokens for sandbox Pods, which fetch a session's files before a run and send back what it
 * wrote (the Kubernetes backend's stage and harvest containers). A worker grants one per execution and revokes it
 * when the run ends; Redis keeps only the token's hash, so reading Redis yields no usable token. Workers hold no
 * signing key for this.
 */
export class TransferGrants {
  readonly #redis: Redis;
  readonly #k: Keys;
  constructor(redis: Redis, k: Keys) {
    this.#redis = redis;
    this.#k = k;
  }

  /** A new token for `grant`, valid for `ttlSeconds` at most. */
  async grant(grant: TransferGrant, ttlSeconds: number): Promise<string> {
    const token = randomBytes(32).toString('base64url');
    await this.#redis.set(
      this.#k.transferGrant(hashOf(token)),
      JSON.stringify(grant),
      'EX',
      Math.max(1, Math.ceil(ttlSeconds)),
    );
    return token;
  }

  /** The grant behind `token`, or undefined when there is none (never issued, expired or revoked). */
  async resolve(token: string): Promise<TransferGrant | undefined> {
    if (token.length === 0 || token.length > 128) return undefined;
    const raw = await this.#redis.get(this.#k.transferGrant(hashOf(token)));
    return raw === null ? undefined : (JSON.parse(raw) as TransferGrant);
  }

  async revoke(token: string): Promise<void> {
    await this.#redis.del(this.#k.transferGrant(hashOf(token)));
  }
}
