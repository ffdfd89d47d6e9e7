/**
 * session-fork, session-snapshot: fork (POST …/fork {count: 1}) and snapshot (POST …/snapshots {name}) of a live
 * process session holding 1 GiB of files (16 files of 64 MiB), on the quick start's btrfs data disk with quotas, where
 * each is a subvolume snapshot. One of each in turn, and beside them the floor: the same snapshot made by the bench
 * itself with the btrfs ioctl sandgate uses (`snapshotSubvolume` of @sandgate/storage, read-only, on a scratch
 * directory of the same disk). Goal: p50 <= 100 ms.
 * Extra disk: the forks and snapshots are kept until the samples are taken, then the filesystem's used bytes (statfs,
 * after `btrfs filesystem sync`) are compared with before, per copy, and each copy's exclusive bytes are read from its
 * qgroup (`btrfs qgroup show -e`); `size_bytes` is what the snapshot answer reports (what it refers to, as counted in
 * the storage quota). Then one fork is brought up and overwrites 64 MiB of one of its files in place: its extra disk
 * must be no more than those changed bytes. Goal: no more than the changed bytes.
 */
import { execFile } from 'node:child_process';
import { mkdir, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { deleteSubvolume, snapshotSubvolume } from '@sandgate/storage';
import { createSession, deleteSession, runWait } from './lib/api.ts';
import { N, WARMUP, wanted } from './lib/knobs.ts';
import { deleteSnapshot, fork, snapshot } from './lib/lifecycle-api.ts';
import { main, rounds } from './lib/main.ts';
import { quickStart, type QuickStart } from './lib/quick-start.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, round, summarize } from './lib/stats.ts';

const run = promisify(execFile);
const FORK = { bench: 'session-fork', target: 'p50 <= 100 ms; extra disk <= changed bytes' };
const SNAPSHOT = { bench: 'session-snapshot', target: 'p50 <= 100 ms; extra disk <= changed bytes' };
const MiB = 1 << 20;
const FILES = 16;
const FILE_MIB = 64;
const CHANGED_MIB = 64;
/** Writes files `from` to `from + 3` (256 MiB): four runs make the 1 GiB, each well within a run's time limit. */
const writeQuarter = (from: number) => `import os
block = os.urandom(${FILE_MIB} << 20)
for i in range(${from}, ${from + 4}):
    with open('/mnt/data/big-%02d.bin' % i, 'wb') as f:
        f.write(block)
print(1)`;
const OVERWRITE = `import os
fd = os.open('/mnt/data/big-00.bin', os.O_WRONLY)
os.pwrite(fd, os.urandom(${CHANGED_MIB} << 20), 0)
os.fsync(fd)
os.close(fd)
print(1)`;

/** Bytes in use on the filesystem of `path`, after btrfs has committed what is pending. */
async function usedBytes(path: string): Promise<number> {
  await run('btrfs', ['filesystem', 'sync', path]);
  const fs = await statfs(path);
  return (fs.blocks - fs.bfree) * fs.bsize;
}

/** The exclusive bytes of the subvolume at `path` (its qgroup's `excl`), after a sync. */
async function exclusiveBytes(path: string): Promise<number> {
  await run('btrfs', ['filesystem', 'sync', path]);
  const { stdout } = await run('btrfs', ['qgroup', 'show', '-ef', '--raw', path]);
  const row = stdout.split('\n').find((l) => /^0\/\d+\s/.test(l.trim()));
  const cols = row?.trim().split(/\s+/) ?? [];
  const excl = Number(cols[2]);
  if (!Number.isFinite(excl)) throw new Error(`no qgroup row for ${path}: ${stdout}`);
  return excl;
}

const mib = (bytes: number) => round(bytes / MiB, 2);

async function measure(stack: Stack): Promise<void> {
  const source = await createSession(stack);
  for (let from = 0; from < FILES; from += 4) {
    const body = { session_id: source.id, language: 'python', code: writeQuarter(from), timeout_ms: 60_000 };
    await runWait(stack, body, { wait: 90 });
  }
  const sessionsDir = join(stack.dataDir, 'sessions');
  const scratch = join(stack.dataDir, 'bench-scratch');
  await mkdir(scratch, { recursive: true });
  const samples = Math.max(5, Math.ceil(N / 2));
  const forkMs: number[] = [];
  const snapMs: number[] = [];
  const rawMs: number[] = [];
  const forks: string[] = [];
  const snaps: string[] = [];
  const raws: string[] = [];
  const sizes: number[] = [];
  const before = await usedBytes(stack.dataDir);
  try {
    for (let i = 0; i < samples; i++) {
      if (wanted(FORK.bench)) {
        const f = await fork(stack, source.id);
        forkMs.push(f.ms);
        forks.push(f.copy);
      }
      if (wanted(SNAPSHOT.bench)) {
        const name = `bench-${i}`;
        const s = await snapshot(stack, source.id, name);
        snapMs.push(s.ms);
        snaps.push(name);
        sizes.push(s.json.size_bytes);
      }
      const target = join(scratch, `raw-${i}`);
      const t0 = performance.now();
      await snapshotSubvolume(join(sessionsDir, source.id), target, { readOnly: true });
      rawMs.push(performance.now() - t0);
      raws.push(target);
    }
    const after = await usedBytes(stack.dataDir);
    const copies = forks.length + snaps.length + raws.length;
    const perCopy = (after - before) / copies;
    const forkExcl = forks.length ? await exclusiveBytes(join(sessionsDir, forks[0]!)) : NaN;
    const snapExcl = snaps.length
      ? await exclusiveBytes(join(stack.dataDir, 'snapshots', source.id, snaps[0]!, 'files'))
      : NaN;
    // One fork diverges: it comes up and overwrites 64 MiB of one of its files in place.
    let changed: Record<string, number> = {};
    if (forks.length) {
      const copy = forks[0]!;
      const beforeChange = await usedBytes(stack.dataDir);
      await runWait(stack, { session_id: copy, language: 'python', code: OVERWRITE, timeout_ms: 60_000 }, { wait: 90 });
      const afterChange = await usedBytes(stack.dataDir);
      changed = {
        changed_mib: CHANGED_MIB,
        diverged_fork_exclusive_mib: mib(await exclusiveBytes(join(sessionsDir, copy))),
        diverged_fork_fs_used_growth_mib: mib(afterChange - beforeChange),
      };
    }
    const raw = summarize(rawMs);
    const common = {
      source_files_mib: FILES * FILE_MIB,
      raw_ioctl_snapshot_p50_ms: raw.p50_ms,
      raw_ioctl_snapshot_p95_ms: raw.p95_ms,
      copies_kept: copies,
      fs_used_growth_per_copy_kib: round((after - before) / 1024 / copies, 1),
    };
    // A copy nothing has changed yet takes metadata only (a tree block or a few): within 1 MiB, both by its qgroup
    // and by the filesystem's used bytes.
    const okDisk = (excl: number) => excl <= MiB && perCopy <= MiB;
    if (forks.length) {
      const s = summarize(forkMs);
      // The diverged fork: no more than the bytes it changed (and 1 MiB of metadata).
      const grown =
        (changed.diverged_fork_exclusive_mib ?? Infinity) <= CHANGED_MIB + 1 &&
        (changed.diverged_fork_fs_used_growth_mib ?? Infinity) <= CHANGED_MIB + 1;
      emit({
        ...FORK,
        ...s,
        ...common,
        fork_exclusive_kib: round(forkExcl / 1024, 1),
        ...changed,
        ratio_to_raw_ioctl: round(s.p50_ms / raw.p50_ms, 2),
        pass: s.p50_ms <= 100 && okDisk(forkExcl) && grown,
      });
    }
    if (snaps.length) {
      const s = summarize(snapMs);
      emit({
        ...SNAPSHOT,
        ...s,
        ...common,
        snapshot_exclusive_kib: round(snapExcl / 1024, 1),
        snapshot_size_bytes_reported_mib: mib(sizes[0] ?? NaN),
        ratio_to_raw_ioctl: round(s.p50_ms / raw.p50_ms, 2),
        pass: s.p50_ms <= 100 && okDisk(snapExcl),
      });
    }
  } finally {
    for (const id of forks) await deleteSession(stack, id);
    for (const name of snaps) await deleteSnapshot(stack, source.id, name);
    for (const dir of raws) await deleteSubvolume(dir).catch(() => {});
    await deleteSession(stack, source.id);
  }
}

main(async () => {
  let qs: QuickStart | null = null;
  let stack: Stack | null = null;
  try {
    qs = await quickStart();
    stack = await startStack(['standalone'], {
      ...qs.env,
      SANDGATE_MAX_SESSIONS: '100000',
      SANDGATE_SESSION_DISK_BYTES: '2GiB',
      SANDGATE_TENANT_STORAGE_BYTES: '1000GiB',
      SANDGATE_MAX_SNAPSHOTS: '1000',
    });
    for (let i = 0; i < WARMUP; i++) {
      const s = await createSession(stack);
      await runWait(stack, { session_id: s.id, language: 'python', code: 'print(1)' });
      const f = await fork(stack, s.id);
      await snapshot(stack, s.id, 'warm');
      await deleteSnapshot(stack, s.id, 'warm');
      await deleteSession(stack, f.copy);
      await deleteSession(stack, s.id);
    }
    await rounds(async () => {
      try {
        await measure(stack!);
      } catch (e) {
        for (const f of [FORK, SNAPSHOT]) if (wanted(f.bench)) emitError(f.bench, f.target, e);
      }
    });
  } catch (e) {
    for (const f of [FORK, SNAPSHOT]) if (wanted(f.bench)) emitError(f.bench, f.target, e);
  } finally {
    await stack?.close().catch(() => {});
    await qs?.remove();
  }
});
