import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { deleteSubvolume, SUBVOLUME_ROOT_INO, subvolumeId } from './btrfs.ts';
import { SubvolumeQuota } from './disk-quota.ts';

const run = promisify(execFile);
/** The quick start's data disk (scripts/setup.sh): btrfs with quotas on. */
const DISK = '/var/lib/sandgate';
const LIMIT = 8 << 20;

/** What `btrfs` itself says of the subvolume at `dir`: its id, referenced bytes and limit. */
async function btrfsSays(dir: string): Promise<{ id: string; used: number; limit: number }> {
  const id = (await run('btrfs', ['inspect-internal', 'rootid', dir])).stdout.trim();
  const out = (await run('btrfs', ['qgroup', 'show', '-rf', '--raw', dir])).stdout;
  const row = out.split('\n').find((line) => line.startsWith(`0/${id} `));
  const [, used, , limit] = row?.trim().split(/\s+/) ?? [];
  return { id, used: Number(used), limit: limit === 'none' ? Infinity : Number(limit) };
}

/** The qgroups btrfs lists on the disk (ids), after a sync so that dropped ones are gone. */
async function qgroupIds(): Promise<string[]> {
  const out = (await run('btrfs', ['qgroup', 'show', '--raw', DISK])).stdout;
  return out.split('\n').flatMap((line) => /^(0\/\d+)\s/.exec(line)?.[1] ?? []);
}

// The quota's calls are the kernel's own (ioctls and sysfs, no `btrfs` process): each is checked against what the
// `btrfs` command reads from the same filesystem.
test('on the btrfs data disk, limited subvolumes are made, measured, snapshotted and removed as btrfs sees them', async (t) => {
  const base = await mkdtemp(join(DISK, 'quota-test-'));
  t.after(() => rm(base, { recursive: true, force: true }));
  const quota = await SubvolumeQuota.forDataDir(base, LIMIT);
  if ('unavailable' in quota) throw new Error(`${DISK}: ${quota.unavailable} (run bash scripts/setup.sh)`);

  const dir = join(base, 'one');
  await quota.makeLimited(dir, LIMIT);
  t.after(() => deleteSubvolume(dir).catch(() => {}));
  assert.equal((await stat(dir)).ino, SUBVOLUME_ROOT_INO, 'a subvolume');
  const made = await btrfsSays(dir);
  assert.equal(String(await subvolumeId(dir)), made.id);
  assert.equal(made.limit, LIMIT);

  await writeFile(join(dir, 'data.bin'), Buffer.alloc(3 << 20, 7));
  await run('btrfs', ['filesystem', 'sync', dir]);
  const usage = await quota.usage(dir);
  const said = await btrfsSays(dir);
  assert.deepEqual(usage, { used: said.used, limit: LIMIT });
  assert.ok(usage.used >= 3 << 20, `${usage.used} bytes for 3 MiB written`);
  assert.equal(await quota.reached(dir), false);

  // The limit is the kernel's: past it, writes fail.
  await assert.rejects(writeFile(join(dir, 'more.bin'), Buffer.alloc(LIMIT, 1)), { errno: -122 }); // EDQUOT, which Node has no name for

  const copy = join(base, 'copy');
  await quota.snapshot(dir, copy);
  t.after(() => deleteSubvolume(copy).catch(() => {}));
  const copied = await btrfsSays(copy);
  assert.notEqual(copied.id, made.id);
  assert.equal(copied.limit, LIMIT, 'the copy has its own limit');
  assert.equal(String(await subvolumeId(copy)), copied.id);

  // removing() deletes through the given call, then drops the qgroup (or the kernel does, once the extents are gone).
  await quota.removing(copy, () => deleteSubvolume(copy));
  await assert.rejects(stat(copy), { code: 'ENOENT' });
  await run('btrfs', ['subvolume', 'sync', base]);
  const left = await qgroupIds();
  assert.ok(left.includes(`0/${made.id}`), 'the source keeps its qgroup');
  assert.ok(!left.includes(`0/${copied.id}`), `the copy's qgroup 0/${copied.id} is gone`);

  await assert.rejects(quota.usage(join(base, 'missing')), { code: 'ENOENT' });
});
