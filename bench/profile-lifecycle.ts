/**
 * Where a fork's and a snapshot's time goes, on the quick start's btrfs data disk: `node --import tsx
 * bench/profile-lifecycle.ts` (BENCH_PROFILE_N samples of each, default 10). Printed as one JSON line:
 *   op_roundtrip   a session operation that does nothing (POST …/pause of a session already paused): the gateway takes
 *                  the session's lock, queues the operation, a worker takes it, answers over Redis, the lock goes
 *   fork, snapshot the API's figures (a live process session holding 1 GiB of files)
 *   steps          the storage work a fork and a snapshot do in the worker, replayed here one step at a time with the
 *                  same functions (@sandgate/storage) on a subvolume of the same disk: the snapshot ioctl (writable for
 *                  a fork, read-only for a snapshot), the qgroup limit ioctl a fork's copy gets, and the
 *                  `btrfs qgroup show` a fork's and a snapshot's size is read with (a child process)
 *   btrfs_*        how many `btrfs` processes sandgate started during 3 forks and 3 snapshots, and which (strace,
 *                  execve only)
 * `… profile-lifecycle.ts state`: where sandgate's CPU goes when a stateful session holding a 50 MiB DataFrame
 * is paused and resumed (BENCH_PROFILE_N times each, default 10): the standalone process under V8's CPU profiler,
 * its self time by category and function over the pauses and over the resumes (bench/lib/cpu-profile.ts), and its
 * CPU per operation.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { deleteSubvolume, limitSubvolume, snapshotSubvolume, SubvolumeQuota } from '@sandgate/storage';
import { createSession, deleteSession, runWait } from './lib/api.ts';
import { analyse, monotonicUs, type CpuProfile } from './lib/cpu-profile.ts';
import { deleteSnapshot, fork, pause, resume, snapshot } from './lib/lifecycle-api.ts';
import { cpuMsOf } from './lib/proc.ts';
import { main } from './lib/main.ts';
import { quickStart, type QuickStart } from './lib/quick-start.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { round, sleep, summarize } from './lib/stats.ts';

const M = Number(process.env.BENCH_PROFILE_N || 10);
const run = promisify(execFile);
const writeQuarter = (from: number) => `import os
block = os.urandom(64 << 20)
for i in range(${from}, ${from + 4}):
    with open('/mnt/data/big-%02d.bin' % i, 'wb') as f:
        f.write(block)
print(1)`;

/** Times `fn` M times; answers the p50 and the spread. */
async function times(fn: (i: number) => Promise<unknown>): Promise<{ p50_ms: number; min_ms: number; max_ms: number }> {
  const xs: number[] = [];
  for (let i = 0; i < M; i++) {
    const t0 = performance.now();
    await fn(i);
    xs.push(performance.now() - t0);
  }
  const s = summarize(xs);
  return { p50_ms: s.p50_ms, min_ms: s.min_ms, max_ms: s.max_ms };
}

/** Counts the `btrfs` processes the stack's process starts while `fn` runs (strace on execve only). */
async function btrfsSpawns(
  stack: Stack,
  fn: () => Promise<void>,
): Promise<{ count: number; commands: Record<string, number> }> {
  const out = `/tmp/sandgate-profile-lifecycle-${stack.prefix}.strace`;
  const tracer = spawn('strace', ['-f', '-qq', '-e', 'trace=execve', '-o', out, '-p', String(stack.procs[0]!.pid)], {
    stdio: 'ignore',
  });
  await sleep(1000);
  try {
    await fn();
  } finally {
    tracer.kill('SIGINT');
    await new Promise((r) => tracer.once('exit', r));
  }
  const text = await readFile(out, 'utf8').catch(() => '');
  await rm(out, { force: true });
  // Each PATH entry tried is an execve of its own: only those that succeeded started a process.
  const started = text.split('\n').filter((l) => /execve\("[^"]*btrfs"/.test(l) && /= 0$/.test(l.trim()));
  const commands: Record<string, number> = {};
  for (const l of started) {
    const argv = /\[("[^\]]*)\]/.exec(l)?.[1]?.replace(/"/g, '').split(', ').slice(1, 3).join(' ') ?? '?';
    commands[argv] = (commands[argv] ?? 0) + 1;
  }
  return { count: started.length, commands };
}

/** The pause and the resume of a stateful session holding a 50 MiB DataFrame, under the CPU profiler. */
async function stateProfile(qs: QuickStart): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-bench-prof-'));
  const stack = await startStack(['standalone'], { ...qs.env, SANDGATE_MAX_SESSIONS: '100000' }, [
    '--cpu-prof',
    `--cpu-prof-dir=${dir}`,
  ]);
  try {
    const session = await createSession(stack, { mode: 'stateful', undo: 'off' });
    const code = 'import numpy as np, pandas as pd\ndf = pd.DataFrame(np.random.default_rng(1).random((655360, 10)))';
    await runWait(stack, { session_id: session.id, language: 'python', code }, { wait: 120, expectStdout: null });
    await pause(stack, session.id);
    await resume(stack, session.id);
    const pid = stack.procs[0]!.pid;
    const windows = {
      pause: [] as { fromUs: number; toUs: number }[],
      resume: [] as { fromUs: number; toUs: number }[],
    };
    const cpu = { pause: 0, resume: 0 };
    const lat = { pause: [] as number[], resume: [] as number[] };
    for (let i = 0; i < M; i++) {
      for (const op of ['pause', 'resume'] as const) {
        const c0 = await cpuMsOf(pid);
        const w = { fromUs: monotonicUs(), toUs: 0 };
        lat[op].push((op === 'pause' ? await pause(stack, session.id) : await resume(stack, session.id)).ms);
        w.toUs = monotonicUs();
        windows[op].push(w);
        cpu[op] += (await cpuMsOf(pid)) - c0;
      }
    }
    await deleteSession(stack, session.id);
    await stack.close();
    const files = (await readdir(dir)).filter((f) => f.endsWith('.cpuprofile') && f.split('.')[3] === String(pid));
    const profiles = await Promise.all(
      files.map(async (f) => JSON.parse(await readFile(join(dir, f), 'utf8')) as CpuProfile),
    );
    const out: Record<string, unknown> = { profile: 'lifecycle-state', samples: M, dataframe_mib: 50 };
    for (const op of ['pause', 'resume'] as const) {
      // Self time over that operation's windows, from the process's main-thread profile (the biggest).
      const parts = windows[op].map(
        (w) => profiles.map((p) => analyse(p, w, 12)).sort((a, b) => b.busyMs - a.busyMs)[0]!,
      );
      const sum = (pick: (b: (typeof parts)[number]) => Record<string, number>) => {
        const acc: Record<string, number> = {};
        for (const b of parts) for (const [k, v] of Object.entries(pick(b))) acc[k] = (acc[k] ?? 0) + v / M;
        return Object.fromEntries(
          Object.entries(acc)
            .sort((a, b) => b[1] - a[1])
            .slice(0, 12)
            .map(([k, v]) => [k, round(v)]),
        );
      };
      out[op] = {
        latency: summarize(lat[op]),
        process_cpu_ms_per_op: round(cpu[op] / M),
        profiled_busy_ms_per_op: round(parts.reduce((a, b) => a + b.busyMs, 0) / M),
        categories_ms_per_op: sum((b) => b.categories),
        top_functions_ms_per_op: sum((b) => Object.fromEntries(b.functions)),
      };
    }
    process.stdout.write(`${JSON.stringify(out)}\n`);
  } finally {
    await stack.close().catch(() => {});
    await rm(dir, { recursive: true, force: true });
  }
}

main(async () => {
  let qs: QuickStart | null = null;
  let stack: Stack | null = null;
  try {
    qs = await quickStart();
    if (process.argv[2] === 'state') return await stateProfile(qs);
    stack = await startStack(['standalone'], {
      ...qs.env,
      SANDGATE_MAX_SESSIONS: '100000',
      SANDGATE_SESSION_DISK_BYTES: '2GiB',
      SANDGATE_TENANT_STORAGE_BYTES: '1000GiB',
      SANDGATE_MAX_SNAPSHOTS: '1000',
    });
    const source = await createSession(stack);
    for (let from = 0; from < 16; from += 4) {
      await runWait(
        stack,
        { session_id: source.id, language: 'python', code: writeQuarter(from), timeout_ms: 60_000 },
        {
          wait: 90,
        },
      );
    }
    const idle = await createSession(stack);
    await runWait(stack, { session_id: idle.id, language: 'python', code: 'print(1)' });
    await pause(stack, idle.id);
    const s = stack;
    const forks: string[] = [];
    const snaps: string[] = [];
    const opRoundtrip = await times(() => pause(s, idle.id));
    const forkT = await times(async () => forks.push((await fork(s, source.id)).copy));
    const snapT = await times(async (i) => {
      await snapshot(s, source.id, `p-${i}`);
      snaps.push(`p-${i}`);
    });
    const spawns = await btrfsSpawns(stack, async () => {
      for (let i = 0; i < 3; i++) {
        forks.push((await fork(s, source.id)).copy);
        await snapshot(s, source.id, `q-${i}`);
        snaps.push(`q-${i}`);
      }
    });
    // The storage steps, replayed on the source session's subvolume.
    const from = join(stack.dataDir, 'sessions', source.id);
    const scratch = join(stack.dataDir, 'bench-scratch');
    await mkdir(scratch, { recursive: true });
    const quota = await SubvolumeQuota.forDataDir(stack.dataDir, 2 * 2 ** 30);
    if ('unavailable' in quota) throw new Error(quota.unavailable);
    const made: string[] = [];
    const snapRw = await times(async (i) => {
      await snapshotSubvolume(from, join(scratch, `rw-${i}`));
      made.push(join(scratch, `rw-${i}`));
    });
    const limit = await times((i) => limitSubvolume(join(scratch, `rw-${i}`), 2 * 2 ** 30));
    const snapRo = await times(async (i) => {
      await snapshotSubvolume(from, join(scratch, `ro-${i}`), { readOnly: true });
      made.push(join(scratch, `ro-${i}`));
    });
    const qgroupShow = await times((i) => quota.usage(join(scratch, `rw-${i}`)));
    const btrfsVersion = await times(() => run('btrfs', ['--version']));
    for (const dir of made) await deleteSubvolume(dir).catch(() => {});
    for (const id of forks) await deleteSession(stack, id);
    for (const name of snaps) await deleteSnapshot(stack, source.id, name);
    await deleteSession(stack, source.id);
    await deleteSession(stack, idle.id);
    const line = {
      profile: 'lifecycle',
      samples: M,
      op_roundtrip: opRoundtrip,
      fork: forkT,
      snapshot: snapT,
      steps: {
        snapshot_ioctl_writable: snapRw,
        qgroup_limit_ioctl: limit,
        snapshot_ioctl_read_only: snapRo,
        btrfs_qgroup_show_process: qgroupShow,
        btrfs_version_process: btrfsVersion,
      },
      btrfs_processes_per_fork_and_snapshot: round(spawns.count / 6, 2),
      btrfs_commands_during_3_forks_and_3_snapshots: spawns.commands,
      fork_unexplained_p50_ms: round(
        forkT.p50_ms - opRoundtrip.p50_ms - snapRw.p50_ms - limit.p50_ms - qgroupShow.p50_ms,
      ),
      snapshot_unexplained_p50_ms: round(snapT.p50_ms - opRoundtrip.p50_ms - snapRo.p50_ms - qgroupShow.p50_ms),
    };
    process.stdout.write(`${JSON.stringify(line)}\n`);
  } finally {
    await stack?.close().catch(() => {});
    await qs?.remove();
  }
});
