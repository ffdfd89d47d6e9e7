import { chmod, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { SandgateError, SESSION_ID_PATTERN } from '@sandgate/contracts';
import { errno } from './fd-path.ts';
import { SubvolumeQuota } from './disk-quota.ts';
import { SessionCopies } from './session-copies.ts';
import type { Owner } from './write-inside.ts';
import { Volumes } from './volumes.ts';
import { handOver, removeOwnedDir, usedBytesOf } from './owned-dir.ts';

const SESSION_ID = new RegExp(SESSION_ID_PATTERN);

export interface WorkspacesOptions {
  /** Root of sandgate's files (SANDGATE_DATA_DIR); sessions live in `${dataDir}/sessions/<id>`. */
  dataDir: string;
  /** Owner of each session directory: the sandbox user (uid 1000), so code can write to /mnt/data. Default: as is. */
  owner?: Owner;
  /** Per-session disk quota (see SubvolumeQuota): each session directory is then a subvolume with that limit. */
  quota?: SubvolumeQuota;
  /** The tenants' volumes beside the sessions. Default: under the same data directory, without size limits. */
  volumes?: Volumes;
}

/** Session workspaces on the local filesystem, each bind-mounted as /mnt/data into its sandbox. */
export class Workspaces {
  /** SANDGATE_DATA_DIR: what else lives beside the sessions (the warm pool's slot directories) goes under it. */
  readonly dataDir: string;
  readonly #sessionsDir: string;
  readonly #owner: Owner | undefined;
  /** The per-session disk quota, when the data directory enforces one. */
  readonly quota: SubvolumeQuota | undefined;
  /** The volumes (POST /v1/volumes) on the same data directory, which sessions mount. */
  readonly volumes: Volumes;

  constructor({ dataDir, owner, quota, volumes }: WorkspacesOptions) {
    this.dataDir = dataDir;
    this.quota = quota;
    this.volumes = volumes ?? new Volumes({ dataDir, ...(owner ? { owner } : {}) });
    this.#sessionsDir = join(dataDir, 'sessions');
    this.#owner = owner;
  }

  /** Ends the work the quota does in the background (it makes spare subvolumes): before the data directory goes. */
  async close(): Promise<void> {
    await this.quota?.close();
  }

  /** The session's directory; the id is checked first because it becomes part of a host path. */
  dir(sessionId: string): string {
    if (typeof sessionId !== 'string' || !SESSION_ID.test(sessionId)) {
      throw new SandgateError('invalid_path', 'session id must look like sess_<12 hex digits>');
    }
    return join(this.#sessionsDir, sessionId);
  }

  /** Creates the session directory (and its parents) if missing and returns it. */
  async create(sessionId: string): Promise<string> {
    const dir = this.dir(sessionId);
    // 0711: the sandbox user may pass through to its own directory but not list anyone else's session.
    await mkdir(this.#sessionsDir, { recursive: true, mode: 0o711 });
    await chmod(this.dataDir, 0o711);
    await chmod(this.#sessionsDir, 0o711);
    if (this.quota) {
      await this.quota.ensure(dir);
    } else {
      await mkdir(dir, 0o755).catch((e: unknown) => {
        if (errno(e) !== 'EEXIST') throw e;
      });
    }
    await handOver(dir, this.#owner);
    return dir;
  }

  /**
   * Bytes the session's files take: the subvolume's own count under disk quotas, else the sizes of its files (as far
   * as a bounded walk sees). 0 for a session with no directory.
   */
  async usedBytes(sessionId: string): Promise<number> {
    return usedBytesOf(this.dir(sessionId), this.quota);
  }

  /** Bytes the files under `dir` take (a session's directory, or a copy of one): as usedBytes counts them. */
  usedBytesAt(dir: string): Promise<number> {
    return usedBytesOf(dir, this.quota);
  }

  /**
   * Deletes the session directory and everything in it, and everything kept beside it (saved interpreter, snapshots,
   * undo steps); a missing one is not an error.
   */
  async remove(sessionId: string): Promise<void> {
    this.dir(sessionId);
    await new SessionCopies(this).removeAll(sessionId);
    await removeOwnedDir(this.#sessionsDir, sessionId, this.quota);
  }
}

export interface OpenWorkspacesOptions {
  dataDir: string;
  owner: Owner;
  /** SANDGATE_SESSION_DISK_BYTES; 0: no quota. */
  sessionDiskBytes: number;
  /** Told when the quota cannot be enforced on this data directory. */
  warn(message: string): void;
}

/**
 * The workspaces of a gateway or worker: with per-session disk quotas when the data directory can enforce them
 * (btrfs with quotas on, as scripts/setup.sh makes it), without (and a warning) when it cannot. Volumes are limited to
 * their sizes wherever the data directory can do it, whether sessions have a quota or not.
 */
export async function openWorkspaces({
  dataDir,
  owner,
  sessionDiskBytes,
  warn,
}: OpenWorkspacesOptions): Promise<Workspaces> {
  await mkdir(dataDir, { recursive: true, mode: 0o711 });
  const quota = await SubvolumeQuota.forDataDir(dataDir, sessionDiskBytes || 1 << 20).catch((e: Error) => ({
    unavailable: e.message,
  }));
  const volumes = new Volumes({ dataDir, owner, ...('unavailable' in quota ? {} : { quota }) });
  if (sessionDiskBytes === 0) return new Workspaces({ dataDir, owner, volumes });
  if ('unavailable' in quota) {
    warn(
      `per-session disk quotas are off: ${quota.unavailable}. scripts/setup.sh puts the data directory on a btrfs ` +
        'filesystem with quotas (see docs/reliability.md); SANDGATE_SESSION_DISK_BYTES=0 silences this',
    );
    return new Workspaces({ dataDir, owner, volumes });
  }
  return new Workspaces({ dataDir, owner, quota, volumes });
}
