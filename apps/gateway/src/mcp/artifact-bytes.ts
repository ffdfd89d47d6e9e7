import type { ImageContent } from '@modelcontextprotocol/sdk/types.js';
import { SandgateError } from '@sandgate/contracts';
import { openInside } from '@sandgate/storage';

/** What models take as image content; an SVG is code, not a picture, and stays a file. */
const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
export const isImage = (mimeType: string) => IMAGE_TYPES.has(mimeType);
/** Charts returned with one run, at most; the rest are still listed as artifacts. */
const MAX_RUN_IMAGES = 8;

export type SmallFile = { bytes: Buffer } | { tooLarge: number };

/**
 * Reads a session file of at most `max` bytes, opened the hostile-file-safe way. Only the size taken at open is
 * read: a process the sandbox left running may still be growing the file.
 */
export async function readSmallFile(dir: string, path: string, max: number): Promise<SmallFile> {
  const { handle, stat } = await openInside(dir, path);
  try {
    if (stat.size > max) return { tooLarge: stat.size };
    const buf = Buffer.alloc(stat.size);
    let got = 0;
    while (got < buf.length) {
      const { bytesRead } = await handle.read(buf, got, buf.length - got, got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return { bytes: buf.subarray(0, got) };
  } finally {
    await handle.close();
  }
}

/** The images among a run's artifacts, as image content, within `budget` bytes in all. */
export async function artifactImages(
  dir: string,
  artifacts: { path: string; mime_type: string }[],
  budget: number,
): Promise<ImageContent[]> {
  const images: ImageContent[] = [];
  let left = budget;
  for (const a of artifacts) {
    if (!isImage(a.mime_type) || images.length >= MAX_RUN_IMAGES) continue;
    let file: SmallFile;
    try {
      file = await readSmallFile(dir, a.path, left);
    } catch (err) {
      // Gone or replaced by something unservable since the run ended: it is simply not shown.
      if (err instanceof SandgateError) continue;
      throw err;
    }
    if ('tooLarge' in file) continue;
    left -= file.bytes.length;
    images.push({ type: 'image', data: file.bytes.toString('base64'), mimeType: a.mime_type });
  }
  return images;
}
