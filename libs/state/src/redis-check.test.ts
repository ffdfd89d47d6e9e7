import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRedis } from './redis.ts';
import { redisWarnings } from './redis-check.ts';

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as { port: number };
  await new Promise((r) => srv.close(r));
  return port;
}

/** A redis-server of this test's own, on a free port, with `args`; stopped after the test. */
async function ownRedis(t: TestContext, args: string[]) {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-redis-'));
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, ...args], { stdio: 'ignore' });
  const redis = createRedis(`redis://127.0.0.1:${port}`, 'redis-check-test');
  t.after(async () => {
    redis.disconnect();
    child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });
  await redis.ping();
  return redis;
}

test('a Redis that keeps nothing on disk and evicts keys gets a warning for each', async (t) => {
  const redis = await ownRedis(t, ['--save', '', '--appendonly', 'no', '--maxmemory-policy', 'allkeys-lru']);
  const warnings = await redisWarnings(redis);
  assert.equal(warnings.length, 2, warnings.join('\n'));
  assert.match(warnings[0]!, /maxmemory-policy allkeys-lru.*set maxmemory-policy noeviction/);
  assert.match(warnings[1]!, /keeps no data on disk.*appendonly yes/);
});

test('snapshots only are named too; an append-only, noeviction Redis gets none', async (t) => {
  const snapshots = await ownRedis(t, ['--save', '900 1', '--appendonly', 'no', '--maxmemory-policy', 'noeviction']);
  const [only, ...rest] = await redisWarnings(snapshots);
  assert.match(only ?? '', /snapshots only/);
  assert.deepEqual(rest, []);
  const good = await ownRedis(t, ['--appendonly', 'yes', '--maxmemory-policy', 'noeviction']);
  assert.deepEqual(await redisWarnings(good), []);
});

test('a Redis that refuses CONFIG gets one warning saying what to check', async (t) => {
  const redis = await ownRedis(t, ['--rename-command', 'CONFIG', '""']);
  const warnings = await redisWarnings(redis);
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /could not read Redis's configuration .* noeviction and persistence/);
});
