/**
 * The configuration `npm run quickstart` gives users, for the benches of sessions that last (pause, resume, fork,
 * snapshots, undo, templates): the data directory on the quick start's btrfs disk with per-session quotas (where a
 * fork or a snapshot is a subvolume snapshot), API keys on (a tenant key every request carries, and an operator key for
 * templates), rate limits and tenant quotas counted (bench/lib/stack.ts), and the runtime image SANDGATE_IMAGE names
 * (one with dill and pandas for stateful sessions' variables).
 */
import { randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { deleteSubvolume, SUBVOLUME_ROOT_INO, SubvolumeQuota } from '@sandgate/storage';
import { onCleanup } from './main.ts';
import { IMAGE } from './raw-docker.ts';

export interface QuickStart {
  /** The directory the stacks' data directories are made in (BENCH_DATA_PARENT is set to it). */
  dataParent: string;
  /** What a stack of this configuration adds to sandgate's environment. */
  env: Record<string, string>;
  /** The operator key of those stacks (SANDGATE_OPERATOR_KEYS), for the operator's API (templates). */
  operatorKey: string;
  /** Removes the directory and what is left in it. */
  remove(): Promise<void>;
}

/**
 * Makes a directory of its own on the quick start's data disk (BENCH_DATA_PARENT, else SANDGATE_DATA_DIR, else
 * /var/lib/sandgate, which must be btrfs with quotas) and points BENCH_DATA_PARENT at it for the stacks started after.
 */
export async function quickStart(): Promise<QuickStart> {
  const parent = process.env.BENCH_DATA_PARENT || process.env.SANDGATE_DATA_DIR || '/var/lib/sandgate';
  const quota = await SubvolumeQuota.forDataDir(parent, 1 << 20).catch((e: Error) => ({ unavailable: e.message }));
  if ('unavailable' in quota) {
    throw new Error(
      `this bench measures on the quick start's data disk, and ${parent} has no disk quotas (${quota.unavailable}): ` +
        'run `npm run setup` as root, or point BENCH_DATA_PARENT at a btrfs directory with quotas enabled',
    );
  }
  const dataParent = join(parent, `bench-lc-${randomBytes(4).toString('hex')}`);
  await mkdir(dataParent, { mode: 0o711 });
  await chmod(dataParent, 0o711);
  process.env.BENCH_DATA_PARENT = dataParent;
  const remove = () => removeWithSubvolumes(dataParent);
  const unregister = onCleanup(remove);
  const operatorKey = `op-${randomBytes(16).toString('hex')}`;
  return {
    dataParent,
    env: {
      SANDGATE_IMAGE: IMAGE,
      SANDGATE_API_KEYS: `${randomBytes(16).toString('hex')}:bench-tenant`,
      SANDGATE_OPERATOR_KEYS: operatorKey,
      ...extraEnv(),
    },
    operatorKey,
    async remove() {
      unregister();
      await remove();
    },
  };
}

/**
 * BENCH_SANDGATE_ENV=NAME=value,NAME=value: more of sandgate's settings for these stacks (to see what one changes,
 * e.g. SANDGATE_SWEEP_INTERVAL_S), after the configuration's own.
 */
function extraEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const item of (process.env.BENCH_SANDGATE_ENV ?? '').split(',').filter(Boolean)) {
    const eq = item.indexOf('=');
    if (eq <= 0 || !item.startsWith('SANDGATE_'))
      throw new Error(`BENCH_SANDGATE_ENV: "${item}" is no SANDGATE_NAME=value`);
    env[item.slice(0, eq)] = item.slice(eq + 1);
  }
  return env;
}

/**
 * Removes `dir` and everything under it: subvolumes (read-only snapshots among them, which `rm` cannot empty) are
 * deleted deepest first, then the rest. What a stack leaves when it stops before deleting its sessions.
 */
async function removeWithSubvolumes(dir: string): Promise<void> {
  const visit = async (path: string): Promise<void> => {
    const names = await readdir(path).catch(() => [] as string[]);
    for (const name of names) {
      const child = join(path, name);
      const st = await lstat(child).catch(() => undefined);
      if (!st?.isDirectory()) continue;
      await visit(child);
      if (st.ino === SUBVOLUME_ROOT_INO) await deleteSubvolume(child).catch(() => {});
    }
  };
  await visit(dir);
  await rm(dir, { recursive: true, force: true });
}
