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
