import type { Readable } from 'node:stream';
import { statfs } from 'node:fs/promises';
import { SandgateError, type FileEntry } from '@sandgate/contracts';
import { normalizeUserPath, writeFileInside, type UrlSigner } from '@sandgate/storage';
import type { Config } from '@sandgate/config';
import { presentFile } from './present.ts';

/**
 * Where the files of something a client addresses live: a session's directory or a volume's. The files API (upload,
 * list, download, delete) works the same on both; what differs is here: the id download links are signed for, what
 * bounds a new file, and what is recorded after a change.
 */
export interface FileSpace {
  /** The session's or volume's id (`sess_…`, `vol_…`): download URLs name it. */
  owner: string;
  /** Its directory on the data disk. */
  dir: string;
  /** Refuses a file of `bytes` that does not fit (a quota, a volume's size), before it takes its name. */
  admit(bytes: number): Promise<void>;
  /** Records what the files take now, after an upload or a delete. */
  measure(): Promise<void>;
  /** What the kernel answering EDQUOT while a file is written means for this space; default: the session's quota. */
  full?(): SandgateError;
}

export interface StoreOptions {
  /** Bound of the one file (SANDGATE_MAX_UPLOAD_BYTES for a client's upload). */
  maxBytes: number;
  /** An existing file is replaced (else file_exists). */
  overwrite: boolean;
}

/**
 * Streams `source` into the space at `path` (a client path, checked here). Refused before anything is kept when the
 * data directory is short of free space (insufficient_storage) or the space does not admit the file; the space's
 * usage is then recorded.
 */
export async function storeFile(
  config: Config,
  signer: UrlSigner,
  space: FileSpace,
  path: string,
  source: Readable | NodeJS.ReadableStream,
  { maxBytes, overwrite }: StoreOptions,
): Promise<FileEntry> {
  await checkFreeSpace(config);
  const stat = await writeFileInside(space.dir, normalizeUserPath(path), source, {
    maxBytes,
    overwrite,
    owner: { uid: config.sandboxUid, gid: config.sandboxUid },
    beforePlace: (bytes) => space.admit(bytes),
  }).catch((err: unknown) => {
    if (space.full && (err as NodeJS.ErrnoException).code === 'EDQUOT') throw space.full();
    throw err;
  });
  await space.measure();
  return presentFile(space.owner, { path, size: stat.size, mtimeMs: stat.mtimeMs }, signer);
}

/** insufficient_storage while the data directory has less than SANDGATE_MIN_FREE_BYTES free. */
async function checkFreeSpace({ dataDir, minFreeBytes }: Config): Promise<void> {
  const fs = await statfs(dataDir);
  const free = fs.bavail * fs.bsize;
  if (free < minFreeBytes) {
    throw new SandgateError(
      'insufficient_storage',
      `the server has ${free} bytes free for files, less than the ` +
        `${minFreeBytes} it keeps in reserve; uploads resume when space is freed`,
    );
  }
}
