/**
 * Sandgate as real child processes on loopback: its own Redis key prefix, its own temp data dir, a free port.
 * The bench process is only the client, so what it measures is what any HTTP client would see.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { LABELS } from '@sandgate/backends/testing';
import { deleteKeys, freePort, REDIS_URL } from '../../test/redis-and-ports.ts';
import { cpuMsOfAll } from './proc.ts';
import { docker } from './raw-docker.ts';
import { request } from './http.ts';
import { API_KEYS, READY_TIMEOUT_S } from './knobs.ts';
import { onCleanup } from './main.ts';
import { sleep } from './stats.ts';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export const ENTRY = {
  standalone: 'apps/standalone/src/main.ts',
  gateway: 'apps/gateway/src/main.ts',
  worker: 'apps/worker/src/main.ts',
  /** Gateway + worker in one process with a backend that does nothing (bench/lib/noop-stack.ts). */
  noop: 'bench/lib/noop-stack.ts',
  /** No sandgate at all: a bare BullMQ queue behind node:http, the accept path's baseline (bench/lib/bare-queue.ts). */
  bare: 'bench/lib/bare-queue.ts',
} as const;
export type EntryName = keyof typeof ENTRY;

export interface Proc {
  name: EntryName;
  child: ChildProcess;
  pid: number;
  /** The last lines it printed, for error messages. */
  tail(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with how it ended. */
  stop(graceMs?: number): Promise<string>;
}

export interface Stack {
  url: string;
  /** What every request to it carries: the API key when the stack has one (BENCH_API_KEYS=1). */
  headers: Record<string, string>;
  prefix: string;
  dataDir: string;
  env: Record<string, string>;
  procs: Proc[];
  redis: Redis;
  start(name: EntryName, nodeArgs?: string[]): Promise<Proc>;
  waitReady(timeoutMs?: number): Promise<void>;
  /** Stops every process (gateway first), removes what is left of the run; answers with how each process ended. */
  close(): Promise<Record<string, string>>;
}

/** Waits for `exit` or `timeoutMs`; true when it exited. */
function exitOf(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((r) => {
    const t = setTimeout(() => r(false), timeoutMs);
    child.once('exit', () => {
      clearTimeout(t);
      r(true);
    });
  });
}

/**
 * Where each stack's data directory is made (BENCH_DATA_PARENT, default the temporary directory). The quick start's
 * data directory is on btrfs with quotas, so `BENCH_DATA_PARENT=/var/lib/sandgate` measures with per-session disk
 * quotas, as a deployment made by scripts/setup.sh runs. Read when a stack starts, so that a bench may set it first
 * (bench/lib/quick-start.ts).
 */
const dataParent = (): string => process.env.BENCH_DATA_PARENT || tmpdir();

/**
 * A stack of the given processes (e.g. ['standalone'] or ['gateway', 'worker']), ready when /readyz says so.
 * `env` adds to or overrides sandgate's environment (SANDGATE_POOL_SIZE, SANDGATE_MAX_SESSIONS, ...).
 */
export async function startStack(
  names: EntryName[],
  env: Record<string, string> = {},
  nodeArgs: string[] = [],
): Promise<Stack> {
  const prefix = `sgbench${randomBytes(4).toString('hex')}`;
  const dataDir = await mkdtemp(join(dataParent(), 'sandgate-bench-'));
  const port = await freePort();
  const fullEnv: Record<string, string> = {
    REDIS_URL,
    SANDGATE_REDIS_PREFIX: prefix,
    SANDGATE_DATA_DIR: dataDir,
    SANDGATE_PORT: String(port),
    SANDGATE_HOST: '127.0.0.1',
    SANDGATE_LOG_LEVEL: 'warn',
    // One client plays every tenant at thousands of runs a second: limits far above that, so they are counted
    // (their cost is in the figures) but never refuse.
    SANDGATE_RATE_LIMIT_PER_MIN: '1000000000',
    SANDGATE_TENANT_RUNS_PER_MIN: '1000000000',
    SANDGATE_TENANT_UPLOADS_PER_MIN: '1000000000',
    SANDGATE_TENANT_MAX_RUNNING: '1000000',
    SANDGATE_TENANT_MAX_QUEUED: '1000000000',
    ...(API_KEYS ? { SANDGATE_API_KEYS: `${randomBytes(16).toString('hex')}:bench-tenant` } : {}),
    ...env,
  };
  // The first key of SANDGATE_API_KEYS (`key:tenant,…`), if any, is the one the bench's requests carry.
  const apiKey = fullEnv.SANDGATE_API_KEYS?.split(',')[0]?.split(':')[0];
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 3, connectionName: 'sandgate-bench' });
  let closing: Promise<Record<string, string>> | null = null;
  const stack: Stack = {
    url: `http://127.0.0.1:${fullEnv.SANDGATE_PORT}`,
    headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
    prefix,
    dataDir,
    env: fullEnv,
    procs: [],
    redis,
    async start(name, nodeArgs = []) {
      const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', ENTRY[name]], {
        cwd: ROOT,
        // Only what sandgate reads plus what node needs; nothing of the bench's own knobs.
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', ...fullEnv },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const lines: string[] = [];
      const keep = (chunk: Buffer) => {
        for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) lines.push(l.slice(0, 500));
        if (lines.length > 40) lines.splice(0, lines.length - 40);
      };
      child.stdout!.on('data', keep);
      child.stderr!.on('data', keep);
      if (child.pid === undefined) throw new Error(`could not start ${name}`);
      const proc: Proc = {
        name,
        child,
        pid: child.pid,
        tail: () => lines.join('\n'),
        async stop(graceMs = 15_000) {
          if (child.exitCode !== null || child.signalCode !== null)
            return `already exited (${child.exitCode ?? child.signalCode})`;
          child.kill('SIGTERM');
          if (await exitOf(child, graceMs)) return `exited on SIGTERM (${child.exitCode ?? child.signalCode})`;
          child.kill('SIGKILL');
          await exitOf(child, 5000);
          return `did not exit within ${graceMs} ms of SIGTERM; killed`;
        },
      };
      stack.procs.push(proc);
      return proc;
    },
    async waitReady(timeoutMs = READY_TIMEOUT_S * 1000) {
      const deadline = Date.now() + timeoutMs;
      let last = '';
      while (Date.now() < deadline) {
        for (const p of stack.procs) {
          if (p.child.exitCode !== null)
            throw new Error(`${p.name} exited with ${p.child.exitCode} during start-up:\n${p.tail()}`);
        }
        try {
          const res = await request('GET', `${stack.url}/readyz`);
          if (res.status === 200) return;
          last = res.text.slice(0, 300);
        } catch (e) {
          last = (e as Error).message;
        }
        await sleep(100);
      }
      throw new Error(
        `sandgate not ready after ${timeoutMs} ms (${last}):\n${stack.procs.map((p) => `[${p.name}] ${p.tail()}`).join('\n')}`,
      );
    },
    close() {
      closing ??= closeStack();
      return closing;
    },
  };
  const unregister = onCleanup(() => stack.close());
  /** Gateway first (no new work), then workers, which finish their runs and drop their pools; then what is left. */
  async function closeStack(): Promise<Record<string, string>> {
    unregister();
    const order = [...stack.procs].sort((a, b) => rank(a.name) - rank(b.name));
    const ended: Record<string, string> = {};
    for (const p of order) ended[p.name] = await p.stop();
    await removeStackContainers(stack).catch(() => {});
    await deleteKeys(prefix).catch(() => {});
    redis.disconnect();
    await rm(dataDir, { recursive: true, force: true });
    return ended;
  }
  try {
    for (const n of names) await stack.start(n, nodeArgs);
    await stack.waitReady();
  } catch (e) {
    await stack.close();
    throw e;
  }
  return stack;
}

const rank = (n: EntryName) => (n === 'gateway' ? 0 : 1);

/**
 * The safety net after the workers stopped: every sandgate container of this run's deployment (the Redis
 * prefix, which sandgate puts on each sandbox as org.sandgate.deployment) that is still there.
 * Never touches another run's containers: other people use this engine at the same time.
 */
async function removeStackContainers(stack: Stack): Promise<void> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${LABELS.deployment}=${stack.prefix}`] } });
  await Promise.all(
    list.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => {}),
    ),
  );
}

/** CPU time (user + system, ms) all of the stack's processes have used so far. */
export function stackCpuMs(stack: Stack): Promise<number> {
  return cpuMsOfAll(stack.procs.map((p) => p.pid));
}
