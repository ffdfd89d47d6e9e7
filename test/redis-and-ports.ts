/**
 * What tests and benches share about their surroundings: the Redis they use, a free port, and removing a
 * run's keys. Node builtins and createRedis only, so a bench client does not load gateway, worker or dockerode.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRedis } from '@sandgate/state';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A loopback port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as { port: number };
  await new Promise((r) => srv.close(r));
  return port;
}

/** Deletes every key under `prefix` (a test's or bench's own Redis prefix), on a connection of its own. */
export async function deleteKeys(prefix: string): Promise<void> {
  const redis = createRedis(REDIS_URL, 'sandgate-cleanup');
  try {
    for (let cursor = '0'; ;) {
      const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (found.length) await redis.unlink(...found);
      cursor = next;
      if (cursor === '0') break;
    }
  } finally {
    redis.disconnect();
  }
}

/**
 * A redis-server of the caller's own (never the shared one), on a free loopback port, in a temp directory, started
 * with `args` (e.g. ['--appendonly', 'yes']). `signal` sends it a signal (SIGSTOP hangs it with its connections
 * open, SIGCONT wakes it); `stop` kills it and removes the directory.
 */
export async function startRedisServer(
  args: string[] = [],
): Promise<{ url: string; signal(signal: NodeJS.Signals): void; stop(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-redis-'));
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, ...args], {
    stdio: 'ignore',
  });
  const url = `redis://127.0.0.1:${port}`;
  const probe = createRedis(url, 'sandgate-redis-probe');
  try {
    await probe.ping();
  } finally {
    probe.disconnect();
  }
  return {
    url,
    signal: (signal) => void child.kill(signal),
    async stop() {
      child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    },
  };
}
