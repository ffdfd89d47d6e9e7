import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, readdir, rename, rmdir } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { emptyDirectory, type Owner, type SubvolumeQuota } from '@sandgate/storage';

/** Parses a `uid:gid` user spec; a bare uid means the same gid. */
export function parseUser(user: string): Owner {
  const [uid, gid = uid] = user.split(':').map(Number);
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error(`user must be uid[:gid], got ${user}`);
  return { uid: uid!, gid: gid! };
}

/** The empty directories warm-pool sandboxes mount at /mnt/data until a run adopts one: `<dataDir>/pool/<slot>`. */
export class SlotDirs {
  readonly root: string;
  readonly #owner: Owner;
  /** With per-session disk quotas each slot is a subvolume with the quota, and becomes the session's when adopted. */
  readonly quota: SubvolumeQuota | undefined;

  constructor(dataDir: string, owner: Owner, quota?: SubvolumeQuota) {
    this.root = join(dataDir, 'pool');
    this.#owner = owner;
    this.quota = quota;
  }

  /** A new random slot id and its empty directory, owned by the sandbox user. */
  async create(): Promise<{ slot: string; dir: string }> {
    // 0711 like sessions/: a sandbox may pass through to its own directory but list no one else's.
    await mkdir(this.root, { recursive: true, mode: 0o711 });
    await chmod(this.root, 0o711);
    const slot = randomBytes(6).toString('hex');
    const dir = join(this.root, slot);
    if (this.quota) await this.quota.create(dir);
    else await mkdir(dir, 0o755);
    await chmod(dir, 0o755);
    await chown(dir, this.#owner.uid, this.#owner.gid);
    return { slot, dir };
  }

  /**
   * Removes a slot directory that no run adopted. Only ever rmdir: such a directory held no user code's files,
   * and one that did is not followed into. A directory that is gone (adopted, or removed already) is fine.
   */
  async remove(dir: string): Promise<void> {
    if (!this.owns(dir)) return;
    const remove = () =>
      rmdir(dir).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
    if (this.quota) await this.quota.removing(dir, remove);
    else await remove();
  }

  /** Whether `dir` is a slot directory of this pool root (sweep learns slot paths from the engine). */
  owns(dir: string): boolean {
    const rel = relative(this.root, dir);
    return rel !== '' && !rel.startsWith('..') && !rel.includes(sep);
  }
}

/**
 * Hands a warm sandbox's directory to a session: every entry of the session directory moves into the slot
 * directory, then the slot directory is renamed over the (now empty) session directory. The sandbox's bind mount
 * follows the directory, not its name, so the sandbox sees the session's files at /mnt/data and the host path is
 * the session's again. Renames only: nothing is copied or followed, so symlinks the sandbox made stay inert.
 * On failure the entries moved so far are put back.
 */
export async function adoptWorkspace(sessionDir: string, slotDir: string, quota?: SubvolumeQuota): Promise<void> {
  if (quota) return adoptSubvolume(sessionDir, slotDir, quota);
  const moved: string[] = [];
  try {
    for (const name of await readdir(sessionDir)) {
      await rename(join(sessionDir, name), join(slotDir, name));
      moved.push(name);
    }
    await rename(slotDir, sessionDir);
  } catch (err) {
    for (const name of moved) await rename(join(slotDir, name), join(sessionDir, name)).catch(() => {});
    throw err;
  }
}

/**
 * adoptWorkspace under per-session disk quotas: files cannot be renamed from one subvolume into another, so only an
 * empty session (a one-shot's, as every pooled run is) takes the slot's subvolume, limit and all; its own empty
 * subvolume goes back to the blanks. One with files fails here and the run goes cold in its own subvolume.
 */
async function adoptSubvolume(sessionDir: string, slotDir: string, quota: SubvolumeQuota): Promise<void> {
  if ((await readdir(sessionDir)).length > 0) throw new Error('the session has files in a subvolume of its own');
  await quota.recycle(sessionDir);
  try {
    await rename(slotDir, sessionDir);
  } catch (err) {
    await quota.create(sessionDir).catch(() => {});
    throw err;
  }
}

/**
 * The reverse of adoptWorkspace, for a sandbox going back to the pool once nothing runs in it (after its reset): the
 * session's entries move out of the mounted directory into a new one, which takes the session's path, and the
 * mounted directory, empty now, goes back to its slot path (free since the adoption, and the path the engine still
 * reports for the mount). Renames only. On failure the session's path holds every entry again, in whichever of the
 * two directories it could keep, and the sandbox must not be used again.
 */
export async function releaseWorkspace(sessionDir: string, slotDir: string, slots: SlotDirs): Promise<void> {
  const { dir: fresh } = await slots.create();
  try {
    await moveEntries(sessionDir, fresh);
    await rename(sessionDir, slotDir);
  } catch (err) {
    await moveEntries(fresh, sessionDir).catch(() => {});
    await slots.remove(fresh).catch(() => {});
    throw err;
  }
  try {
    await rename(fresh, sessionDir);
  } catch (err) {
    // Something took the session's path in between (it holds nothing of ours): the old directory goes back.
    await rename(slotDir, sessionDir)
      .then(() => moveEntries(fresh, sessionDir))
      .catch(() => {});
    throw err;
  }
}

async function moveEntries(from: string, to: string): Promise<void> {
  for (const name of await readdir(from)) await rename(join(from, name), join(to, name));
}

/**
 * releaseWorkspace under per-session disk quotas, where the sandbox's mounted subvolume is the session's directory
 * since the adoption. It goes back to its slot path; the session's path gets a snapshot of it (what the run left,
 * shared, nothing copied or followed), or nothing when the run left nothing (whatever needs the session's directory
 * later makes it); then the mounted subvolume is emptied. It is looked at once it is no longer at the session's
 * path, so nothing that reached it before is left out. On failure the session's files are at the session's path or
 * the slot's, and the sandbox must not be used again.
 */
export async function releaseSubvolume(sessionDir: string, slotDir: string, quota: SubvolumeQuota): Promise<void> {
  await rename(sessionDir, slotDir);
  if ((await readdir(slotDir)).length === 0) return;
  try {
    await quota.snapshot(slotDir, sessionDir);
  } catch (err) {
    await rename(slotDir, sessionDir).catch(() => {});
    throw err;
  }
  await emptyDirectory(slotDir);
}
