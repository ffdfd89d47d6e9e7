import { constants } from 'node:fs';
import { lstat, open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { SandgateError } from '@sandgate/contracts';
import { errno, openRoot } from './fd-path.ts';
import { removeDirAt } from './remove-tree.ts';
import { walkTree } from './walk-tree.ts';
import type { SubvolumeQuota } from './disk-quota.ts';
import type { Owner } from './write-inside.ts';

// A directory a sandbox writes (a session's, a volume's): made by the platform, handed to the sandbox user, measured,
// and removed without following anything the sandbox left in it.

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = constants;

/**
 * Gives `dir` mode 0755 and `owner` (when set), through an fd opened without following, so nothing planted at that
 * name can redirect the chown.
 */
export async function handOver(dir: string, owner: Owner | undefined): Promise<void> {
  const handle = await open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW).catch((e: unknown) => {
    throw new SandgateError('invalid_path', `${dir} exists and is not a directory`, { cause: e });
  });
  try {
    await handle.chmod(0o755);
    if (owner) await handle.chown(owner.uid, owner.gid);
  } finally {
    await handle.close();
  }
}

/** Bytes `dir`'s files take: the subvolume's own count under quotas, else the sizes its files add up to; 0 if none. */
export async function usedBytesOf(dir: string, quota: SubvolumeQuota | undefined): Promise<number> {
  // A one-shot that left nothing has no directory: nothing to ask btrfs (a command per run) about.
  if (
    !(await lstat(dir).then(
      (st) => st.isDirectory(),
      () => false,
    ))
  )
    return 0;
  if (quota) return (await quota.usage(dir).catch(() => ({ used: 0 }))).used;
  const walked = await walkTree(dir).catch(() => ({ entries: [] }));
  return walked.entries.reduce((sum, e) => sum + e.size, 0);
}

/** Deletes `<root>/<name>` and everything in it (a subvolume under quotas); a missing one is not an error. */
export async function removeOwnedDir(root: string, name: string, quota: SubvolumeQuota | undefined): Promise<void> {
  let parent: FileHandle;
  try {
    parent = await openRoot(root);
  } catch (e) {
    if (errno(e) === 'ENOENT') return;
    throw e;
  }
  // The contents were written by a sandbox, so they are removed without following anything.
  const remove = () => removeDirAt(parent, name);
  try {
    if (quota) await quota.removing(join(root, name), remove);
    else await remove();
  } finally {
    await parent.close();
  }
}
