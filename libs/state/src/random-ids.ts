import { randomFillSync } from 'node:crypto';

// Ids are made on every request: one call into the CSPRNG per 4 KiB of ids rather than one per id, which costs
// a few µs each (as crypto.randomUUID does). Every byte is handed out once.
const pool = Buffer.alloc(4096);
let used = pool.length;

/** `bytes` cryptographically random bytes, as hex. */
export function randomHex(bytes: number): string {
  if (used + bytes > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  const hex = pool.toString('hex', used, used + bytes);
  used += bytes;
  return hex;
}
