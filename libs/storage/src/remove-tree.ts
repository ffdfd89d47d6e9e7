import { randomBytes } from 'node:crypto';
import { lstat, open, readdir, rename, rmdir, unlink, type FileHandle } from 'node:fs/promises';
import { DIR_FLAGS, at, atRaw, errno, openChildDir } from './fd-path.ts';
import { RESERVED_PREFIX } from './user-path.ts';

/*
 * fs.rm({ recursive }) walks by path strings, so hostile code that swaps a directory for a symlink between its
 * readdir and its unlinks would make it delete files outside the session. This remover only ever names one entry
 * below a directory fd it holds, so a swap can at worst move an entry out of its reach, never redirect it.
 */

/** Held directory fds per removal; deeper subtrees are renamed up to the top and handled on a later pass. */
const MAX_FD_DEPTH = 64;
/** Guards against hostile code that keeps adding entries while we delete them. */
const MAX_PASSES = 1_000;
const BATCH = 32;

const ignore =
  (...codes: string[]) =>
  (e: unknown) => {
    if (!codes.includes(errno(e) ?? '')) throw e;
  };

/** Unlinks a non-directory; true when it turned into a directory meanwhile and needs another pass. */
async function unlinkEntry(path: string | Buffer): Promise<boolean> {
  try {
    await unlink(path);
    return false;
  } catch (e) {
    if (errno(e) === 'ENOENT') return false;
    if (errno(e) === 'EISDIR' || errno(e) === 'EPERM') return true;
    throw e;
  }
}

/** Removes the directory `name` inside `parent` with all it contains; a non-directory found there is unlinked. */
export async function removeDirAt(parent: FileHandle, name: string): Promise<void> {
  let top: FileHandle;
  try {
    top = await openChildDir(parent, name);
  } catch (e) {
    if (errno(e) === 'ENOENT') return;
    if (errno(e) !== 'ELOOP' && errno(e) !== 'ENOTDIR') throw e;
    if (await unlinkEntry(at(parent, name))) {
      throw new Error(`"${name}" kept changing while it was being removed`, { cause: e });
    }
    return;
  }
  try {
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      if (await emptyDir(top, top, 0)) continue;
      try {
        await rmdir(at(parent, name));
        return;
      } catch (e) {
        if (errno(e) === 'ENOENT') return;
        if (errno(e) === 'ENOTDIR' && !(await unlinkEntry(at(parent, name)))) return;
        if (errno(e) !== 'ENOTEMPTY' && errno(e) !== 'ENOTDIR') throw e;
      }
    }
    throw new Error(`"${name}" kept changing while it was being removed`);
  } finally {
    await top.close();
  }
}

/** Removes everything in the directory `name` inside `parent`, which stays, empty; nothing is followed. */
export async function emptyDirAt(parent: FileHandle, name: string): Promise<void> {
  const top = await openChildDir(parent, name);
  try {
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      if (!(await emptyDir(top, top, 0)) && (await readdir(at(top))).length === 0) return;
    }
    throw new Error(`"${name}" kept changing while it was being emptied`);
  } finally {
    await top.close();
  }
}

/** Empties `dir`; returns true when something was left for another pass (moved up, or added meanwhile). */
async function emptyDir(dir: FileHandle, top: FileHandle, depth: number): Promise<boolean> {
  let again = false;
  const names = await readdir(at(dir), { encoding: 'buffer' });
  for (let i = 0; i < names.length; i += BATCH) {
    const batch = names.slice(i, i + BATCH);
    const kinds = await Promise.all(
      batch.map((n) =>
        lstat(atRaw(dir, n)).then(
          (s) => s.isDirectory(),
          () => undefined,
        ),
      ),
    );
    const retry = await Promise.all(batch.map((n, k) => kinds[k] === false && unlinkEntry(atRaw(dir, n))));
    again = retry.includes(true) || again;
    for (const [k, n] of batch.entries()) {
      if (kinds[k] === true) again = (await removeChildDir(dir, n, top, depth)) || again;
    }
  }
  return again;
}

async function removeChildDir(dir: FileHandle, name: Buffer, top: FileHandle, depth: number): Promise<boolean> {
  const path = atRaw(dir, name);
  if (depth + 1 >= MAX_FD_DEPTH) {
    await rename(path, at(top, `${RESERVED_PREFIX}-rm-${randomBytes(12).toString('hex')}`)).catch(ignore('ENOENT'));
    return true;
  }
  let child: FileHandle;
  try {
    child = await open(path, DIR_FLAGS);
  } catch (e) {
    // Swapped for something else since lstat: remove that thing itself, whatever it is, without following it.
    if (errno(e) === 'ELOOP' || errno(e) === 'ENOTDIR') return unlinkEntry(path);
    if (errno(e) !== 'ENOENT') throw e;
    return false;
  }
  let again: boolean;
  try {
    again = await emptyDir(child, top, depth + 1);
  } finally {
    await child.close();
  }
  try {
    await rmdir(path);
  } catch (e) {
    if (errno(e) === 'ENOTEMPTY') return true;
    if (errno(e) === 'ENOTDIR') return (await unlinkEntry(path)) || again;
    if (errno(e) !== 'ENOENT') throw e;
  }
  return again;
}
