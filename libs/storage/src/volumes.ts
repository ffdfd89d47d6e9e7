import { chmod, lstat, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { SandgateError, VOLUME_ID_PATTERN } from '@sandgate/contracts';
import type { SubvolumeQuota } from './disk-quota.ts';
import type { Owner } from './write-inside.ts';
import { handOver, removeOwnedDir, usedBytesOf } from './owned-dir.ts';

const VOLUME_ID = new RegExp(VOLUME_ID_PATTERN);

/** Where a volume's files are under a data directory: `<dataDir>/volumes/<id>`, the id checked first. */
export function volumeDir(dataDir: string, id: string): string {
  if (typeof id !== 'string' || !VOLUME_ID.test(id)) {
    throw new SandgateError('invalid_path', 'volume id must look like vol_<12 hex digits>');
  }
  return join(dataDir, 'volumes', id);
}

export interface VolumesOptions {
  /** SANDGATE_DATA_DIR: volumes live in `${dataDir}/volumes/<id>`. */
  dataDir: string;
  /** Owner of each volume's directory: the sandbox user, so code can write to a read-write mount. */
  owner?: Owner;
  /** Where the data directory enforces quotas (btrfs): each volume is a subvolume limited to its size. */
  quota?: SubvolumeQuota;
}

/**
 * Volumes' directories on the local filesystem: each is bind-mounted into the sandboxes of the sessions that mount it
 * (Docker), or is the store a session Pod's copy is made from and brought back to (Kubernetes). A directory is named
 * by the volume's id, never its name: a name deleted and made again is a new directory, and a run still holding the
 * old one's job cannot reach it.
 */
export class Volumes {
  readonly #dataDir: string;
  readonly #root: string;
  readonly #owner: Owner | undefined;
  /** The size limit of every volume, where the data directory enforces one. */
  readonly quota: SubvolumeQuota | undefined;

  constructor({ dataDir, owner, quota }: VolumesOptions) {
    this.#dataDir = dataDir;
    this.#root = join(dataDir, 'volumes');
    this.#owner = owner;
    this.quota = quota;
  }

  /** Whether a volume's size is a hard limit for what sandboxes write to it (a btrfs qgroup), not only for uploads. */
  get enforced(): boolean {
    return this.quota !== undefined;
  }

  dir(id: string): string {
    return volumeDir(this.#dataDir, id);
  }

  /** Makes the volume's (empty) directory: a subvolume limited to `sizeBytes` under quotas. It must not exist. */
  async create(id: string, sizeBytes: number): Promise<string> {
    const dir = this.dir(id);
    // 0711: the sandbox user may pass through to a volume mounted for it, never list the others.
    await mkdir(this.#root, { recursive: true, mode: 0o711 });
    await chmod(this.#root, 0o711);
    if (this.quota) await this.quota.makeLimited(dir, sizeBytes);
    else await mkdir(dir, 0o755);
    await handOver(dir, this.#owner);
    return dir;
  }

  async exists(id: string): Promise<boolean> {
    return lstat(this.dir(id)).then(
      (st) => st.isDirectory(),
      () => false,
    );
  }

  /** Bytes the volume's files take: the subvolume's own count under quotas, else the sizes its files add up to. */
  async usedBytes(id: string): Promise<number> {
    return usedBytesOf(this.dir(id), this.quota);
  }

  /** Whether the volume has (all but) reached its size: why a run that failed could not write to it. */
  async reached(id: string): Promise<boolean> {
    return this.quota ? this.quota.reached(this.dir(id)) : false;
  }

  /** Deletes the volume's directory and everything in it (written by sandboxes: nothing is followed). */
  async remove(id: string): Promise<void> {
    this.dir(id);
    await removeOwnedDir(this.#root, id, this.quota);
  }
}
