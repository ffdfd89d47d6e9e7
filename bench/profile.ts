/**
 * Not a figure: where the time of one execution goes inside sandgate. Usage:
 *   node --import tsx bench/profile.ts [noop|cold|pool|stateful|session]   (default: all, in that order)
 * Each mode starts its stack with V8's CPU profiler on (`--cpu-prof`), warms up, runs BENCH_PROFILE_N
 * executions one at a time, and keeps only the profile samples inside that window. It prints one JSON line
 * per mode: latency, CPU ms per execution of the sandgate process(es) by category, top functions and sandgate
 * frames (inclusive), and Redis commands per execution counted with MONITOR over a few more runs
 * (MONITOR slows Redis for everyone while it runs, a few seconds).
 */
import { spawn } from 'node:child_process';
import { cp, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSession, runWait } from './lib/api.ts';
import { analyse, monotonicUs, type Breakdown, type CpuProfile } from './lib/cpu-profile.ts';
import { main } from './lib/main.ts';
import { cpuMsOf } from './lib/proc.ts';
import { startStack, type EntryName, type Stack } from './lib/stack.ts';
import { round, sleep, summarize } from './lib/stats.ts';

type Run = (stack: Stack) => Promise<number>;
interface Mode {
  entries: EntryName[];
  env: Record<string, string>;
  n: number;
  warmup: number;
  setup(stack: Stack): Promise<Run>;
}

// Sessions are left in place (the limit is lifted): deleting them would add their cost to the window.
const oneShot =
  (wait: number, paceMs = 0): Mode['setup'] =>
  async () =>
  async (stack) => {
    const r = await runWait(stack, { language: 'python', code: 'print(1)' }, { wait });
    if (paceMs) await sleep(paceMs);
    return r.ms;
  };
const inSession =
  (body: Record<string, unknown>, code: string, expectStdout: string | null): Mode['setup'] =>
  async (stack) => {
    const s = await createSession(stack, body);
    return async () => (await runWait(stack, { session_id: s.id, language: 'python', code }, { expectStdout })).ms;
  };

const N = Number(process.env.BENCH_PROFILE_N ?? 0);
/** BENCH_PROFILE_KEEP=dir: the .cpuprofile files and each mode's sample window are copied there, to be read further. */
const KEEP = process.env.BENCH_PROFILE_KEEP;
const MODES: Record<string, Mode> = {
  noop: { entries: ['noop'], env: {}, n: N || 1000, warmup: 300, setup: oneShot(5) },
  // The real gateway process and a no-op worker process: what splitting them over the 2 cores changes.
  'noop-split': {
    entries: ['gateway', 'noop'],
    env: { BENCH_NOOP_ROLE: 'worker' },
    n: N || 1000,
    warmup: 300,
    setup: oneShot(5),
  },
  cold: { entries: ['standalone'], env: { SANDGATE_POOL_SIZE: '0' }, n: N || 40, warmup: 3, setup: oneShot(30) },
  pool: { entries: ['standalone'], env: { SANDGATE_POOL_SIZE: '2' }, n: N || 40, warmup: 3, setup: oneShot(30, 1000) },
  stateful: {
    entries: ['standalone'],
    env: {},
    n: N || 300,
    warmup: 10,
    setup: inSession({ mode: 'stateful' }, '1+1', null),
  },
  session: { entries: ['standalone'], env: {}, n: N || 100, warmup: 5, setup: inSession({}, 'print(1)', '1\n') },
};

const perExec = (o: Record<string, number>, n: number) =>
  Object.fromEntries(
    Object.entries(o)
      .sort((a, b) => b[1] - a[1])
      .filter(([, v]) => v / n >= 0.005)
      .map(([k, v]) => [k, round(v / n, 3)]),
  );

async function redisCommands(stack: Stack, run: Run, runs: number): Promise<Record<string, unknown>> {
  const mon = spawn('redis-cli', ['-u', stack.env.REDIS_URL!, 'MONITOR'], { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  mon.stdout.setEncoding('utf8');
  mon.stdout.on('data', (c: string) => {
    out += c;
  });
  await sleep(300);
  for (let i = 0; i < runs; i++) await run(stack);
  await sleep(300);
  mon.kill();
  // Our connections are those that sent a command naming our prefix; every command they sent counts.
  const lines = out
    .split('\n')
    .map((l) => /^\S+ \[\d+ ([^\]]+)\] "([^"]+)"/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null);
  const ours = new Set(lines.filter((m) => m.input.includes(stack.prefix) && m[1] !== 'lua').map((m) => m[1]!));
  const byCommand: Record<string, number> = {};
  let client = 0;
  let lua = 0;
  for (const m of lines) {
    if (m[1] === 'lua') {
      if (m.input.includes(stack.prefix)) lua++;
      continue;
    }
    if (!ours.has(m[1]!)) continue;
    client++;
    byCommand[m[2]!.toLowerCase()] = (byCommand[m[2]!.toLowerCase()] ?? 0) + 1;
  }
  return {
    redis_commands_per_execution: round(client / runs, 1),
    redis_commands_inside_lua_per_execution: round(lua / runs, 1),
    redis_connections: ours.size,
    redis_by_command_per_execution: perExec(byCommand, runs),
  };
}

async function profile(name: string, mode: Mode): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-bench-prof-'));
  const stack = await startStack(mode.entries, { SANDGATE_MAX_SESSIONS: '1000000', ...mode.env }, [
    '--cpu-prof',
    `--cpu-prof-dir=${dir}`,
  ]);
  try {
    const run = await mode.setup(stack);
    for (let i = 0; i < mode.warmup; i++) await run(stack);
    const lat: number[] = [];
    const cpu0 = await Promise.all(stack.procs.map((p) => cpuMsOf(p.pid)));
    const window = { fromUs: monotonicUs(), toUs: 0 };
    for (let i = 0; i < mode.n; i++) lat.push(await run(stack));
    window.toUs = monotonicUs();
    const cpuMs = await Promise.all(stack.procs.map(async (p, i) => (await cpuMsOf(p.pid)) - cpu0[i]!));
    const redis = await redisCommands(stack, run, Math.min(20, mode.n));
    await stack.close();
    if (KEEP) await cp(dir, KEEP, { recursive: true });
    if (KEEP)
      await writeFile(
        join(KEEP, `window-${name}.json`),
        JSON.stringify({ ...window, pids: stack.procs.map((p) => [p.name, p.pid]) }),
      );
    const n = mode.n;
    const processes: Record<string, unknown> = {};
    for (const [i, p] of stack.procs.entries()) {
      // Files are CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile; a process's main thread writes the big one
      // (tsx's loader thread writes a small one too).
      const files = (await readdir(dir)).filter((f) => f.endsWith('.cpuprofile') && f.split('.')[3] === String(p.pid));
      const profiles = await Promise.all(
        files.map(async (f) => JSON.parse(await readFile(join(dir, f), 'utf8')) as CpuProfile),
      );
      const b: Breakdown | undefined = profiles.map((x) => analyse(x, window)).sort((x, y) => y.busyMs - x.busyMs)[0];
      processes[p.name] = {
        process_cpu_ms_per_execution: round(cpuMs[i]! / n, 3),
        ...(b
          ? {
              profiled_busy_ms_per_execution: round(b.busyMs / n, 3),
              categories_ms_per_execution: perExec(b.categories, n),
              top_functions_ms_per_execution: Object.fromEntries(b.functions.map(([f, ms]) => [f, round(ms / n, 3)])),
              sandgate_inclusive_ms_per_execution: perExec(b.sandgateInclusive, n),
            }
          : {}),
      };
    }
    process.stdout.write(
      `${JSON.stringify({ profile: name, executions: n, latency: summarize(lat), processes, ...redis })}\n`,
    );
  } finally {
    await stack.close().catch(() => {});
    await rm(dir, { recursive: true, force: true });
  }
}

main(async () => {
  const chosen = process.argv.slice(2);
  for (const name of chosen.length ? chosen : Object.keys(MODES)) {
    const mode = MODES[name];
    if (!mode) throw new Error(`unknown mode ${name}; one of ${Object.keys(MODES).join(', ')}`);
    await profile(name, mode).catch((e: unknown) => {
      process.stdout.write(`${JSON.stringify({ profile: name, error: e instanceof Error ? e.message : String(e) })}\n`);
    });
  }
});
