import { createHash } from 'node:crypto';
import { openInside } from './open-inside.ts';

const CHUNK = 256 * 1024;

export interface HashLimits {
  /** Files longer than this are not hashed: the answer is null (a sparse file costs no disk, but each byte to read). */
  maxBytes?: number;
  /** Stops between two chunks; the promise then rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * SHA-256 of the file at root/relPath, opened with openInside's guarantees. The file may still be growing under a
 * running sandbox, so the size returned is what was actually hashed, not what stat said. Null when the file is (or
 * grows) longer than `maxBytes`.
 */
export async function sha256Inside(
  root: string,
  relPath: string,
  { maxBytes = Number.POSITIVE_INFINITY, signal }: HashLimits = {},
): Promise<{ sha256: string; size: number } | null> {
  signal?.throwIfAborted();
  const { handle } = await openInside(root, relPath);
  try {
    if ((await handle.stat()).size > maxBytes) return null;
    const hash = createHash('sha256');
    const buf = Buffer.allocUnsafe(CHUNK);
    let size = 0;
    for (;;) {
      signal?.throwIfAborted();
      const { bytesRead } = await handle.read(buf, 0, CHUNK, size);
      if (bytesRead === 0) break;
      hash.update(buf.subarray(0, bytesRead));
      size += bytesRead;
      if (size > maxBytes) return null;
    }
    return { sha256: hash.digest('hex'), size };
  } finally {
    await handle.close();
  }
}
