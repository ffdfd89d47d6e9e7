import { execFile } from 'node:child_process';
import { lstat, statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const BTRFS_MAGIC = 0x9123683e;
/** Writes stop a little before the limit (btrfs reserves ahead): this close counts as reaching it. */
const REACHED_SLACK_BYTES = 256 * 1024;

const btrfs = async (...args: string[]): Promise<string> =>
  (await run('btrfs', args, { encoding: 'utf8', timeout: 30_000 })).stdout;

/**
 * Per-session disk quotas that sandboxed code cannot exceed: each session directory (and each warm-pool slot) is a
 * btrfs subvolume with a qgroup limit, so the kernel answers EDQUOT past it, whatever the code does. Needs the data
 * directory on btrfs with quotas enabled (scripts/setup.sh makes one on a loop file); `forDataDir` answers
 * undefined elsewhere, and the caller says so at start-up.
 */
export class SubvolumeQuota {
  private constructor(readonly bytes: number) {}

  /** A quota for directories under `dataDir`, or undefined (with why) when that filesystem cannot enforce one. */
  static async forDataDir(dataDir: string, bytes: number): Promise<SubvolumeQuota | { unavailable: string }> {
    const fs = await statfs(dataDir);
    if (fs.type !== BTRFS_MAGIC) return { unavailable: `${dataDir} is not on btrfs` };
    try {
      await btrfs('qgroup', 'show', dataDir);
    } catch (err) {
      return { unavailable: `btrfs quotas are not enabled on ${dataDir}: ${(err as Error).message.split('\n')[0]}` };
    }
    return new SubvolumeQuota(bytes);
  }

  /** Makes `dir` (which must not exist) a subvolume limited to the quota. */
  async create(dir: string): Promise<void> {
    await btrfs('subvolume', 'create', dir);
    await btrfs('qgroup', 'limit', String(this.bytes), dir);
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
    const id = (await btrfs('inspect-internal', 'rootid', dir).catch(() => '')).trim();
    await remove();
    if (id) await btrfs('qgroup', 'destroy', `0/${id}`, dirname(dir)).catch(() => {});
  }

  /** Bytes the subvolume at `dir` holds, and its limit. */
  async usage(dir: string): Promise<{ used: number; limit: number }> {
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
