import { lstat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { SandgateError } from '@sandgate/contracts';
import { NOT_THERE, at, errno, openDirPath, openRoot } from './fd-path.ts';
import { emptyDirAt, removeDirAt } from './remove-tree.ts';
import { normalizeUserPath, splitPath } from './user-path.ts';

/**
 * Removes what is at root/relPath without following it: a file, symlink or special file is unlinked, a directory is
 * removed with its contents (symlinks inside are removed, never followed). Missing → `file_not_found`.
 */
export async function removeInside(root: string, relPath: string): Promise<void> {
  const { parents, leaf } = splitPath(normalizeUserPath(relPath));
  const notFound = (cause: unknown) => new SandgateError('file_not_found', `nothing at "${relPath}"`, { cause });
  let dir: FileHandle;
  try {
    dir = await openDirPath(root, parents);
  } catch (e) {
    if (NOT_THERE.has(errno(e) ?? '')) throw notFound(e);
    throw e;
  }
  try {
    const st = await lstat(at(dir, leaf)).catch((e: unknown) => {
      throw errno(e) === 'ENOENT' ? notFound(e) : e;
    });
    if (st.isDirectory()) await removeDirAt(dir, leaf);
    else
      await unlink(at(dir, leaf)).catch((e: unknown) => {
        if (errno(e) !== 'ENOENT') throw e;
      });
  } finally {
    await dir.close();
  }
}

/**
 * Removes everything in the directory `dir` (a host path the caller owns, such as a pool sandbox's workspace),
 * which stays, empty. What is inside was written by sandboxed code: nothing is followed.
 */
export async function emptyDirectory(dir: string): Promise<void> {
  const parent = await openRoot(dirname(dir));
  try {
    await emptyDirAt(parent, basename(dir));
  } finally {
    await parent.close();
  }
}
