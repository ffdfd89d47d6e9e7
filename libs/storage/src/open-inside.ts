import { constants, type Stats } from 'node:fs';
import { lstat, open, type FileHandle } from 'node:fs/promises';
import { SandgateError } from '@sandgate/contracts';
import { NOT_THERE, at, errno, openDirPath } from './fd-path.ts';
import { normalizeUserPath, splitPath } from './user-path.ts';

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = constants;

function notFound(relPath: string, cause?: unknown): SandgateError {
  return new SandgateError(
    'file_not_found',
    `no regular file at "${relPath}"`,
    cause === undefined ? undefined : { cause },
  );
}

/** Hard-linked files are refused: the other name may be one we never meant to expose (or one outside the session). */
export function isServableFile(st: Stats): boolean {
  return st.isFile() && st.nlink === 1;
}

/**
 * Opens a regular file under `root` for reading without following a symlink at any component, even while hostile
 * code swaps components. Anything that is not a single-linked regular file reads as `file_not_found`.
 * The caller closes the handle.
 */
export async function openInside(root: string, relPath: string): Promise<{ handle: FileHandle; stat: Stats }> {
  const { parents, leaf } = splitPath(normalizeUserPath(relPath));
  let dir: FileHandle;
  try {
    dir = await openDirPath(root, parents);
  } catch (e) {
    if (NOT_THERE.has(errno(e) ?? '')) throw notFound(relPath, e);
    throw e;
  }
  let handle: FileHandle;
  try {
    // A cheap look before opening, so devices are never opened in the ordinary case (opening some has side
    // effects). It is only advisory: the fstat below, on what was actually opened, is the check that counts.
    const before = await lstat(at(dir, leaf));
    if (!isServableFile(before)) throw notFound(relPath);
    handle = await open(at(dir, leaf), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (e) {
    if (e instanceof SandgateError) throw e;
    if (NOT_THERE.has(errno(e) ?? '')) throw notFound(relPath, e);
    throw e;
  } finally {
    await dir.close();
  }
  try {
    const stat = await handle.stat();
    if (!isServableFile(stat)) throw notFound(relPath);
    return { handle, stat };
  } catch (e) {
    await handle.close().catch(() => undefined);
    throw e;
  }
}
