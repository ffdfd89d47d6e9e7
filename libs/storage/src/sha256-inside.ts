import { createHash } from 'node:crypto';
import { openInside } from './open-inside.ts';

const CHUNK = 256 * 1024;

/**
 * SHA-256 of the file at root/relPath, opened with openInside's guarantees. The file may still be growing under a
 * running sandbox, so the size returned is what was actually hashed, not what stat said.
 */
export async function sha256Inside(root: string, relPath: string): Promise<{ sha256: string; size: number }> {
  const { handle } = await openInside(root, relPath);
  try {
    const hash = createHash('sha256');
    const buf = Buffer.allocUnsafe(CHUNK);
    let size = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buf, 0, CHUNK, size);
      if (bytesRead === 0) break;
      hash.update(buf.subarray(0, bytesRead));
      size += bytesRead;
    }
    return { sha256: hash.digest('hex'), size };
  } finally {
    await handle.close();
  }
}
