import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, readdir, rename, rmdir, statfs } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import {
  createSubvolume,
  deleteSubvolume,
  destroyQgroup,
  filesystemId,
  limitSubvolume,
  qgroupsDir,
  qgroupUsage,
  snapshotSubvolume,
  subvolumeId,
} from './btrfs.ts';
import { errno } from './fd-path.ts';

const run = promisify(execFile);
const BTRFS_MAGIC = 0x9123683e;
/** Writes stop a little before the limit (btrfs reserves ahead): this close counts as reaching it. */
const REACHED_SLACK_BYTES = 256 * 1024;
/** Empty limited subvolumes kept ready in `<dataDir>/blanks`, per limit, so that making a session's is a rename. */
const SPARE_BLANKS = 4;
/**
 * Blanks are made this long after one was taken, not at once: a one-shot in the warm pool gives its blank back within
 * that time, and making one waits for a transaction commit that the run's own writes would share.
 */
const REFILL_DELAY_MS = 1000;

const btrfs = async (...args: string[]): Promise<string> =>
  (await run('btrfs', args, { encoding: 'utf8', timeout: 30_000 })).stdout;

/**
 * Per-session disk quotas that sandboxed code cannot exceed: each session directory (and each warm-pool slot) is a
 * btrfs subvolume with a qgroup limit, so the kernel answers EDQUOT past it, whatever the code does. Needs the data
 * directory on btrfs with quotas enabled (scripts/setup.sh makes one on a loop file); `forDataDir` answers
 * undefined elsewhere, and the caller says so at start-up.
 */
export class SubvolumeQuota {
  /**
   * Where empty subvolumes with this limit wait to become a session's or a pool slot's: making one takes two ioctls,
   * the first waiting for a transaction commit (tens of milliseconds on a busy machine), taking one a rename. Named
   * `<bytes>-<random>`; a name that starts with `.` is one being made or checked. Only root enters (0700).
   */
  readonly #blanks: string;
  #refillTimer: NodeJS.Timeout | undefined;
  #refilling: Promise<void> | undefined;
  /** Removals left to finish in the background (a recycled subvolume past the spares). */
  readonly #removals = new Set<Promise<void>>();
  #closed = false;

  /** The filesystem's id when the kernel shows its qgroups in sysfs: usage is read there, else from `btrfs`. */
  readonly #fsid: string | undefined;

  private constructor(
    readonly bytes: number,
    dataDir: string,
    fsid: string | undefined,
  ) {
    this.#blanks = join(dataDir, 'blanks');
    this.#fsid = fsid;
  }

  /** A quota for directories under `dataDir`, or undefined (with why) when that filesystem cannot enforce one. */
  static async forDataDir(dataDir: string, bytes: number): Promise<SubvolumeQuota | { unavailable: string }> {
    const fs = await statfs(dataDir);
    if (fs.type !== BTRFS_MAGIC) return { unavailable: `${dataDir} is not on btrfs` };
    // The qgroups directory is there exactly when quotas are enabled (on Linux 5.9 and later); without it, ask btrfs.
    const fsid = await filesystemId(dataDir);
    if (
      await lstat(qgroupsDir(fsid)).then(
        () => true,
        () => false,
      )
    )
      return new SubvolumeQuota(bytes, dataDir, fsid);
    try {
      await btrfs('qgroup', 'show', dataDir);
    } catch (err) {
      return { unavailable: `btrfs quotas are not enabled on ${dataDir}: ${(err as Error).message.split('\n')[0]}` };
    }
    return new SubvolumeQuota(bytes, dataDir, undefined);
  }

  /**
   * Makes `dir` (which must not exist) a subvolume limited to the quota: a ready blank moved there, else a new one.
   * A rename never replaces a subvolume (btrfs answers ENOTEMPTY), so two processes making the same one cannot
   * swap it under each other.
   */
  async create(dir: string): Promise<void> {
    const taken = await this.#takeBlank(dir);
    this.#refill();
    if (taken) return;
    await this.#make(dir);
  }

  /**
   * Makes `to` (which must not exist) a limited subvolume holding what the subvolume `from` holds now: a snapshot,
   * which shares the data and copies nothing; symlinks and all are kept as they are, never followed.
   */
  async snapshot(from: string, to: string): Promise<void> {
    await snapshotSubvolume(from, to);
    await limitSubvolume(to, this.bytes);
  }

  /**
   * Takes the empty subvolume `dir` out of its place to serve again as a blank (or be deleted when enough wait).
   * Throws, `dir` left in place, when it is not empty: something wrote there meanwhile.
   */
  async recycle(dir: string): Promise<void> {
    await mkdir(this.#blanks, { recursive: true, mode: 0o700 });
    const checking = join(this.#blanks, `.recycle-${randomBytes(6).toString('hex')}`);
    await rename(dir, checking);
    if ((await readdir(checking)).length > 0) {
      await rename(checking, dir);
      throw new Error(`${dir} is not empty`);
    }
    if ((await this.#ready()).length < 2 * SPARE_BLANKS) {
      await rename(checking, join(this.#blanks, this.#blankName()));
      return;
    }
    const removal = this.removing(checking, () => rmdir(checking)).catch(() => {});
    this.#removals.add(removal);
    void removal.finally(() => this.#removals.delete(removal));
  }

  async #make(dir: string): Promise<void> {
    await this.makeLimited(dir, this.bytes);
  }

  /** Makes `dir` (which must not exist) a subvolume limited to `bytes`, whatever this quota's own limit: a volume's. */
  async makeLimited(dir: string, bytes: number): Promise<void> {
    await createSubvolume(dir);
    try {
      await limitSubvolume(dir, bytes);
    } catch (err) {
      // Never left unlimited: a subvolume without its limit is removed again.
      await this.removing(dir, () => deleteSubvolume(dir)).catch(() => {});
      throw err;
    }
  }

  #blankName(): string {
    return `${this.bytes}-${randomBytes(6).toString('hex')}`;
  }

  async #ready(): Promise<string[]> {
    const names = await readdir(this.#blanks).catch((e: unknown) => {
      if (errno(e) === 'ENOENT') return [];
      throw e;
    });
    return names.filter((n) => n.startsWith(`${this.bytes}-`));
  }

  async #takeBlank(dir: string): Promise<boolean> {
    for (const name of await this.#ready().catch(() => [])) {
      try {
        await rename(join(this.#blanks, name), dir);
        return true;
      } catch (e) {
        // Taken by another process meanwhile: try the next.
        if (errno(e) !== 'ENOENT') throw e;
      }
    }
    return false;
  }

  /** Makes blanks until SPARE_BLANKS wait, one at a time, in the background; a failure only means no spare. */
  #refill(): void {
    if (this.#closed || this.#refillTimer || this.#refilling) return;
    this.#refillTimer = setTimeout(() => this.#refillNow(), REFILL_DELAY_MS);
    this.#refillTimer.unref();
  }

  async #makeBlanks(): Promise<void> {
    await mkdir(this.#blanks, { recursive: true, mode: 0o700 });
    while ((await this.#ready()).length < SPARE_BLANKS) {
      // Made under a dot name, renamed once limited: a blank is never taken half made.
      const making = join(this.#blanks, `.new-${randomBytes(6).toString('hex')}`);
      await this.#make(making);
      await rename(making, join(this.#blanks, this.#blankName()));
    }
  }

  /** Makes the blanks a refill would, now, and resolves once none is being made (tests, start-up). */
  async settled(): Promise<void> {
    if (this.#refillTimer) {
      clearTimeout(this.#refillTimer);
      this.#refillNow();
    }
    await this.#refilling;
  }

  /**
   * Starts nothing more in the background and resolves once what was started has ended (a refill, removals): the
   * owner closes it before the data directory may go.
   */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#refillTimer);
    this.#refillTimer = undefined;
    await this.#refilling;
    await Promise.all(this.#removals);
  }

  /** Starts the refill a pending timer would have started (once: a refill under way is left to finish). */
  #refillNow(): void {
    this.#refillTimer = undefined;
    this.#refilling ??= this.#makeBlanks()
      .catch(() => {})
      .finally(() => {
        this.#refilling = undefined;
      });
  }

  /** Makes `dir` a limited subvolume unless it exists: another process making the same one at once is no error. */
  async ensure(dir: string): Promise<void> {
    const exists = () =>
      lstat(dir).then(
        () => true,
        () => false,
      );
    if (await exists()) return;
    await this.create(dir).catch(async (e: unknown) => {
      if (!(await exists())) throw e;
    });
  }

  /** Runs `remove`, which deletes the subvolume at `dir`, then drops its accounting (stale qgroups stay otherwise). */
  async removing(dir: string, remove: () => Promise<void>): Promise<void> {
    const id = await subvolumeId(dir).catch(() => undefined);
    await remove();
    if (id !== undefined) await destroyQgroup(dirname(dir), id).catch(() => {});
  }

  /** Bytes the subvolume at `dir` holds, and its limit. */
  async usage(dir: string): Promise<{ used: number; limit: number }> {
    if (this.#fsid !== undefined) return qgroupUsage(this.#fsid, await subvolumeId(dir));
    const out = await btrfs('qgroup', 'show', '-rf', '--raw', dir);
    const row = out.split('\n').find((line) => /^0\/\d+\s/.test(line));
    const [, used, , limit] = row?.trim().split(/\s+/) ?? [];
    if (used === undefined || limit === undefined) throw new Error(`no qgroup for ${dir} in: ${out}`);
    return { used: Number(used), limit: limit === 'none' ? Number.POSITIVE_INFINITY : Number(limit) };
  }

  /** Whether the session's files have (all but) reached the quota: why a run that failed could not write. */
  async reached(dir: string): Promise<boolean> {
    const { used, limit } = await this.usage(dir).catch(() => ({ used: 0, limit: Number.POSITIVE_INFINITY }));
    return used + REACHED_SLACK_BYTES >= limit;
  }
}
