/**
 * The fault suite's stage: sandgate's gateway and worker as separate processes (as an operator runs them), and Redis
 * servers of the test's own, so that a fault can be injected for real: a process SIGKILLed or SIGTERMed, a Redis
 * stopped and started again. The shared Redis on 6379 is never touched by a fault.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import Dockerode from 'dockerode';
import { deleteKeys, freePort, REDIS_URL } from '../redis-and-ports.ts';
import { until } from '../harness.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAINS = { gateway: 'apps/gateway/src/main.ts', worker: 'apps/worker/src/main.ts' } as const;

export interface Proc {
  readonly child: ChildProcess;
  /** Everything it logged so far (JSON lines on stdout, anything on stderr). */
  output(): string;
  /** Resolves with its exit code (or signal) once it has exited. */
  readonly exited: Promise<number | string>;
  kill(signal: NodeJS.Signals): void;
}

/** Starts `node --import tsx <main>` with `env`; the test must end it (fault tests kill it, t.after stops the rest). */
export function spawnProc(kind: keyof typeof MAINS, env: Record<string, string>): Proc {
  const child = spawn(process.execPath, ['--import', 'tsx', MAINS[kind]], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  const exited = new Promise<number | string>((r) => child.once('exit', (code, signal) => r(code ?? signal ?? -1)));
  return {
    child,
    output: () => out,
    exited,
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
  };
}

/** One sandgate deployment's settings: its own key prefix, data directory, port and Docker label. */
export interface Deployment {
  env: Record<string, string>;
  prefix: string;
  dataDir: string;
  /** Removes its containers, keys (on `redisUrl`) and data directory. */
  cleanup(redisUrl?: string): Promise<void>;
}

export async function newDeployment(env: Record<string, string> = {}): Promise<Deployment> {
  const prefix = `sgfault${randomBytes(4).toString('hex')}`;
  const dataDir = env.SANDGATE_DATA_DIR ?? (await mkdtemp(join(tmpdir(), 'sandgate-fault-')));
  const full: Record<string, string> = {
    REDIS_URL,
    SANDGATE_REDIS_PREFIX: prefix,
    SANDGATE_DATA_DIR: dataDir,
    SANDGATE_PORT: String(await freePort()),
    SANDGATE_LOG_LEVEL: 'info',
    SANDGATE_LOG_FORMAT: 'json',
    SANDGATE_SWEEP_INTERVAL_S: '2',
    SANDGATE_LEASE_MS: '3000',
    SANDGATE_POOL_SIZE: '0',
    ...env,
  };
  return {
    env: full,
    prefix,
    dataDir,
    async cleanup(redisUrl = full.REDIS_URL!) {
      const docker = new Dockerode(
        full.DOCKER_HOST ? { socketPath: full.DOCKER_HOST.replace(/^unix:\/\//, '') } : undefined,
      );
      const mine = await docker
        .listContainers({ all: true, filters: { label: [`org.sandgate.deployment=${prefix}`] } })
        .catch(() => []);
      await Promise.all(
        mine.map((c) =>
          docker
            .getContainer(c.Id)
            .remove({ force: true })
            .catch(() => {}),
        ),
      );
      if (redisUrl === REDIS_URL) await deleteKeys(prefix);
      if (!env.SANDGATE_DATA_DIR) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** A gateway process on `env`'s port, once it answers /healthz. */
export async function startGatewayProc(
  env: Record<string, string>,
  port = env.SANDGATE_PORT!,
): Promise<Proc & { url: string }> {
  const p = spawnProc('gateway', { ...env, SANDGATE_PORT: port });
  const url = `http://127.0.0.1:${port}`;
  await killIfFails(
    p,
    until(
      `the gateway on ${port} to answer`,
      async () => {
        if (p.child.exitCode !== null) throw new Error(`the gateway exited: ${p.output()}`);
        return fetch(`${url}/healthz`).then(
          (r) => r.ok,
          () => false,
        );
      },
      60_000,
    ),
  );
  return { ...p, url };
}

/** A worker process, once it has said it is ready. */
export async function startWorkerProc(env: Record<string, string>): Promise<Proc> {
  const p = spawnProc('worker', env);
  await killIfFails(
    p,
    until(
      'the worker to be ready',
      async () => {
        if (p.child.exitCode !== null) throw new Error(`the worker exited: ${p.output()}`);
        return p.output().includes('"msg":"worker ready"');
      },
      60_000,
    ),
  );
  return p;
}

/** A process that did not come up is killed before the error goes on: left running, it would keep the file alive. */
async function killIfFails(p: Proc, ready: Promise<unknown>): Promise<void> {
  try {
    await ready;
  } catch (err) {
    p.kill('SIGKILL');
    await p.exited;
    throw err;
  }
}

export interface Started {
  d: Deployment;
  gateway: Proc & { url: string };
  /** Null with `{ worker: false }`. */
  worker: Proc | null;
}

/**
 * A deployment on `env` with a gateway process and, unless `worker: false`, a worker process; after the test both
 * are SIGKILLed (if still running) and the deployment's containers, keys and files removed.
 */
export async function startDeployment(
  t: TestContext,
  env: Record<string, string> = {},
  { worker = true } = {},
): Promise<Started> {
  const d = await newDeployment(env);
  const procs: Proc[] = [];
  // One hook (they run in the order they were added): the processes are gone before the cleanup, so none of them
  // makes a container (a warm-pool refill, say) after it.
  t.after(async () => {
    for (const p of procs) p.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
    await d.cleanup();
  });
  const gateway = await startGatewayProc(d.env);
  procs.push(gateway);
  const w = worker ? await startWorkerProc(d.env) : null;
  if (w) procs.push(w);
  return { d, gateway, worker: w };
}

/** JSON request to a gateway; the body parsed when it is JSON. */
export async function api(
  url: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: any; ms: number }> {
  const t0 = Date.now();
  const res = await fetch(url + path, {
    method,
    ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed, ms: Date.now() - t0 };
}

/** A redis-server of the test's own, with AOF in a temp directory, on a free loopback port; stop and start it. */
export interface OwnRedis {
  url: string;
  start(): Promise<void>;
  /** SIGTERM (Redis saves its AOF and exits) or SIGKILL; resolves once it has exited. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Sends a signal and returns at once (SIGSTOP: a Redis that hangs without closing its connections). */
  signal(signal: NodeJS.Signals): void;
  close(): Promise<void>;
}

export async function ownRedis(): Promise<OwnRedis> {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-redis-'));
  const port = await freePort();
  let proc: ChildProcess | null = null;
  const ping = () =>
    new Promise<boolean>((resolve) => {
      const c = spawn('redis-cli', ['-p', String(port), 'ping'], { stdio: ['ignore', 'pipe', 'ignore'] });
      let out = '';
      c.stdout.on('data', (b: Buffer) => {
        out += b.toString();
      });
      c.on('exit', () => resolve(out.trim() === 'PONG'));
    });
  const r: OwnRedis = {
    url: `redis://127.0.0.1:${port}`,
    async start() {
      proc = spawn(
        'redis-server',
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--dir',
          dir,
          '--appendonly',
          'yes',
          '--appendfsync',
          'everysec',
          '--save',
          '',
          '--maxmemory-policy',
          'noeviction',
        ],
        { stdio: 'ignore' },
      );
      await until(`our redis-server on ${port}`, ping, 20_000);
    },
    async stop(signal = 'SIGTERM') {
      const p = proc;
      if (!p || p.exitCode !== null) return;
      const gone = new Promise((res) => p.once('exit', res));
      p.kill(signal);
      await gone;
    },
    signal(signal) {
      proc?.kill(signal);
    },
    async close() {
      proc?.kill('SIGCONT');
      await r.stop('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    },
  };
  await r.start();
  return r;
}
