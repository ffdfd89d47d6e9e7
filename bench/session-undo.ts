/**
 * session-undo: what undo costs a run. Before every run on a session made with `undo: "files"` (the default) sandgate
 * keeps a snapshot of its files, and with `undo: "state"` it also saves a stateful interpreter's variables (dill);
 * `undo: "off"` keeps nothing. Sessions of each kind take runs in turn, in blocks of 5 (a process session `print(1)`
 * with undo off and files; a stateful session `x + 1` with undo off, files and state), on the quick start's btrfs data
 * disk. Per mode: p50, sandgate's CPU per run (the standalone process: gateway and worker) and the sandbox's (its
 * cgroup's cpuacct.usage: the agent, the interpreter, the save) and the engine's (dockerd and containerd, which carry
 * the agent's channel; other users of the engine count too), each over that mode's blocks only.
 * session-undo-dataframe: the same for stateful sessions holding a 50 MiB DataFrame (runs of `x + 1` beside it), one
 * run of each in turn: with undo "state" every run first saves the 50 MiB. Also the bytes the kept undo steps hold.
 * Both reported (the docs say what undo "state" costs); they fail only when a run fails.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { LABELS } from '@sandgate/backends/testing';
import { createSession, deleteSession, runWait } from './lib/api.ts';
import { N, WARMUP, wanted } from './lib/knobs.ts';
import { main, rounds } from './lib/main.ts';
import { quickStart, type QuickStart } from './lib/quick-start.ts';
import { cpuMsOfAll, enginePids } from './lib/proc.ts';
import { docker } from './lib/raw-docker.ts';
import { stackCpuMs, startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, round, sleep, summarize } from './lib/stats.ts';

const SMALL = { bench: 'session-undo', target: 'reported: cost of undo "files" and "state" per run' };
const DATAFRAME = {
  bench: 'session-undo-dataframe',
  target: 'reported: cost of undo "state" with 50 MiB of variables',
};
const BLOCK = 5;
/** After a block, time for the run's tail (BullMQ's completion, the lease) before sandgate's CPU is read. */
const TAIL_MS = 50;
const MAKE_DF = `import numpy as np, pandas as pd
df = pd.DataFrame(np.random.default_rng(1).random((655360, 10)))
x = 41`;

interface Kind {
  name: string;
  mode: 'process' | 'stateful';
  undo: 'off' | 'files' | 'state';
  setup?: string;
}

interface Tally {
  lat: number[];
  stackCpuMs: number;
  sandboxCpuMs: number;
  engineCpuMs: number;
  runs: number;
}

/** CPU ms the session's sandbox (its cgroup) has used so far. */
async function sandboxCpuMs(sessionId: string): Promise<number> {
  const [c] = await docker.listContainers({ filters: { label: [`${LABELS.session}=${sessionId}`] } });
  if (c === undefined) throw new Error(`session ${sessionId} has no running sandbox`);
  const ns = await readFile(`/sys/fs/cgroup/cpuacct/docker/${c.Id}/cpuacct.usage`, 'utf8').catch(() =>
    readFile(`/sys/fs/cgroup/system.slice/docker-${c.Id}.scope/cpu.stat`, 'utf8').then((t) =>
      String(Number(/usage_usec (\d+)/.exec(t)?.[1]) * 1000),
    ),
  );
  return Number(ns) / 1e6;
}

/** Bytes the session's undo steps hold: their saved interpreters (their files are snapshots sharing extents). */
async function undoStateBytes(stack: Stack, sessionId: string): Promise<{ steps: number; bytes: number }> {
  const dir = join(stack.dataDir, 'undo', sessionId);
  const steps = await readdir(dir).catch(() => [] as string[]);
  let bytes = 0;
  for (const s of steps)
    bytes += await stat(join(dir, s, 'interpreter.dill')).then(
      (st) => st.size,
      () => 0,
    );
  return { steps: steps.length, bytes };
}

async function compare(
  stack: Stack,
  kinds: Kind[],
  samples: number,
  block: number,
  warmup: number,
): Promise<{ kinds: Kind[]; ids: string[]; tallies: Tally[] }> {
  const ids: string[] = [];
  for (const k of kinds) {
    const s = await createSession(stack, { mode: k.mode, undo: k.undo });
    if (s.undo !== k.undo) throw new Error(`session made with undo ${k.undo} answered undo ${s.undo}`);
    ids.push(s.id);
    if (k.setup)
      await runWait(stack, { session_id: s.id, language: 'python', code: k.setup }, { wait: 120, expectStdout: null });
  }
  const code = (k: Kind) => (k.mode === 'stateful' ? 'x + 1' : 'print(1)');
  const once = async (i: number) => {
    const r = await runWait(
      stack,
      { session_id: ids[i], language: 'python', code: code(kinds[i]!) },
      { wait: 120, expectStdout: kinds[i]!.mode === 'stateful' ? null : '1\n' },
    );
    if (kinds[i]!.mode === 'stateful' && r.exec.result.value !== '42') {
      throw new Error(`x + 1 answered ${JSON.stringify(r.exec.result.value)} in a session with undo ${kinds[i]!.undo}`);
    }
    return r.ms;
  };
  for (let i = 0; i < kinds.length; i++) for (let w = 0; w < warmup; w++) await once(i);
  const tallies: Tally[] = kinds.map(() => ({ lat: [], stackCpuMs: 0, sandboxCpuMs: 0, engineCpuMs: 0, runs: 0 }));
  const engine = await enginePids();
  for (let done = 0; done < samples; done += block) {
    for (let i = 0; i < kinds.length; i++) {
      const t = tallies[i]!;
      const [c0, s0, e0] = await Promise.all([stackCpuMs(stack), sandboxCpuMs(ids[i]!), cpuMsOfAll(engine)]);
      for (let j = 0; j < block && done + j < samples; j++) {
        t.lat.push(await once(i));
        t.runs++;
      }
      await sleep(TAIL_MS);
      const [c1, s1, e1] = await Promise.all([stackCpuMs(stack), sandboxCpuMs(ids[i]!), cpuMsOfAll(engine)]);
      t.stackCpuMs += c1 - c0;
      t.sandboxCpuMs += s1 - s0;
      t.engineCpuMs += e1 - e0;
    }
  }
  return { kinds, ids, tallies };
}

function report(kinds: Kind[], tallies: Tally[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const p50 = (i: number) => summarize(tallies[i]!.lat).p50_ms;
  for (let i = 0; i < kinds.length; i++) {
    const k = kinds[i]!;
    const t = tallies[i]!;
    const s = summarize(t.lat);
    const off = kinds.findIndex((o) => o.mode === k.mode && o.undo === 'off');
    out[k.name] = {
      n: s.n,
      p50_ms: s.p50_ms,
      p95_ms: s.p95_ms,
      sandgate_cpu_ms_per_run: round(t.stackCpuMs / t.runs),
      sandbox_cpu_ms_per_run: round(t.sandboxCpuMs / t.runs),
      engine_cpu_ms_per_run: round(t.engineCpuMs / t.runs),
      ...(off >= 0 && off !== i ? { p50_ratio_to_undo_off: round(s.p50_ms / p50(off), 3) } : {}),
    };
  }
  return out;
}

async function small(stack: Stack): Promise<void> {
  const kinds: Kind[] = [
    { name: 'process_off', mode: 'process', undo: 'off' },
    { name: 'process_files', mode: 'process', undo: 'files' },
    { name: 'stateful_off', mode: 'stateful', undo: 'off', setup: 'x = 41' },
    { name: 'stateful_files', mode: 'stateful', undo: 'files', setup: 'x = 41' },
    { name: 'stateful_state', mode: 'stateful', undo: 'state', setup: 'x = 41' },
  ];
  const { ids, tallies } = await compare(stack, kinds, N, BLOCK, WARMUP);
  const steps = await undoStateBytes(stack, ids[4]!);
  for (const id of ids) await deleteSession(stack, id);
  const r = report(kinds, tallies) as Record<string, { p50_ms: number }>;
  emit({
    ...SMALL,
    n: tallies[4]!.lat.length,
    p50_ms: r.stateful_state!.p50_ms,
    by_mode: r,
    state_undo_steps_kept: steps.steps,
    state_undo_bytes_kept: steps.bytes,
    ratio: r.stateful_state!.p50_ms / r.stateful_off!.p50_ms,
    pass: true,
  });
}

async function dataframe(stack: Stack): Promise<void> {
  const kinds: Kind[] = [
    { name: 'stateful_off', mode: 'stateful', undo: 'off', setup: MAKE_DF },
    { name: 'stateful_files', mode: 'stateful', undo: 'files', setup: MAKE_DF },
    { name: 'stateful_state', mode: 'stateful', undo: 'state', setup: MAKE_DF },
  ];
  const { ids, tallies } = await compare(stack, kinds, Math.max(3, Math.ceil(N / 8)), 1, Math.min(WARMUP, 1));
  const steps = await undoStateBytes(stack, ids[2]!);
  for (const id of ids) await deleteSession(stack, id);
  const r = report(kinds, tallies) as Record<string, { p50_ms: number }>;
  emit({
    ...DATAFRAME,
    n: tallies[2]!.lat.length,
    p50_ms: r.stateful_state!.p50_ms,
    by_mode: r,
    state_undo_steps_kept: steps.steps,
    state_undo_mib_kept: round(steps.bytes / (1 << 20), 1),
    ratio: r.stateful_state!.p50_ms / r.stateful_off!.p50_ms,
    pass: true,
  });
}

main(async () => {
  let qs: QuickStart | null = null;
  let stack: Stack | null = null;
  try {
    qs = await quickStart();
    stack = await startStack(['standalone'], { ...qs.env, SANDGATE_MAX_SESSIONS: '100000' });
    await rounds(async () => {
      for (const [f, fn] of [
        [SMALL, small],
        [DATAFRAME, dataframe],
      ] as const) {
        if (!wanted(f.bench)) continue;
        try {
          await fn(stack!);
        } catch (e) {
          emitError(f.bench, f.target, e);
        }
      }
    });
  } catch (e) {
    for (const f of [SMALL, DATAFRAME]) if (wanted(f.bench)) emitError(f.bench, f.target, e);
  } finally {
    await stack?.close().catch(() => {});
    await qs?.remove();
  }
});
