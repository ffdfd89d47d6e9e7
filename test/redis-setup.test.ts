import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createRedis, redisWarnings } from '@sandgate/state';
import { freePort, startRedisServer } from './redis-and-ports.ts';
import { until } from './harness.ts';

const run = promisify(execFile);
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const START_REDIS = fileURLToPath(new URL('../scripts/start-redis.sh', import.meta.url));

test("the quick start's Redis keeps its data across a restart, evicts nothing and listens on loopback only", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-redis-setup-'));
  const port = await freePort();
  const start = () => run('bash', [START_REDIS, String(port)], { env: { ...process.env, SANDGATE_REDIS_DIR: dir } });
  const pid = async () => Number((await readFile(join(dir, 'redis.pid'), 'utf8')).trim());
  t.after(async () => {
    await pid().then(
      (p) => process.kill(p, 'SIGKILL'),
      () => {},
    );
    await rm(dir, { recursive: true, force: true });
  });

  assert.equal((await start()).stdout.trim(), dir);
  const redis = createRedis(`redis://127.0.0.1:${port}`, 'redis-setup-test');
  t.after(() => redis.disconnect());
  assert.deepEqual(await redis.config('GET', 'bind'), ['bind', '127.0.0.1 -::1']);
  assert.deepEqual(await redisWarnings(redis), [], 'what sandgate checks at start-up is satisfied');
  await redis.set('sandgate-test:kept', 'yes');
  const first = await pid();
  // SHUTDOWN NOSAVE: no snapshot on the way out, so only the append-only file can bring the key back.
  // The server answers SHUTDOWN by closing the connection, so the command gets no reply to wait for.
  void redis.call('SHUTDOWN', 'NOSAVE').catch(() => {});
  await until('the first server to exit', async () => !alive(first), 10_000);
  redis.disconnect();

  await start();
  assert.notEqual(await pid(), first, 'a new server process');
  const again = createRedis(`redis://127.0.0.1:${port}`, 'redis-setup-test');
  t.after(() => again.disconnect());
  assert.equal(await again.get('sandgate-test:kept'), 'yes', 'the key survived the restart');
});

/** A Redis of this test's own, started with `args`, and a connection to it; both gone after the test. */
async function ownRedis(t: TestContext, args: string[]) {
  const server = await startRedisServer(args);
  const redis = createRedis(server.url, 'redis-check-test');
  t.after(async () => {
    redis.disconnect();
    await server.stop();
  });
  return redis;
}

test('start-up check: a Redis that keeps nothing on disk and evicts keys gets a warning for each', async (t) => {
  const redis = await ownRedis(t, ['--save', '', '--appendonly', 'no', '--maxmemory-policy', 'allkeys-lru']);
  const warnings = await redisWarnings(redis);
  assert.equal(warnings.length, 2, warnings.join('\n'));
  assert.match(warnings[0]!, /maxmemory-policy allkeys-lru.*set maxmemory-policy noeviction/);
  assert.match(warnings[1]!, /keeps no data on disk.*appendonly yes/);
});

test('start-up check: snapshots only are named too; an append-only, noeviction Redis gets none', async (t) => {
  const snapshots = await ownRedis(t, ['--save', '900 1', '--appendonly', 'no', '--maxmemory-policy', 'noeviction']);
  const [only, ...rest] = await redisWarnings(snapshots);
  assert.match(only ?? '', /snapshots only/);
  assert.deepEqual(rest, []);
  const good = await ownRedis(t, ['--appendonly', 'yes', '--maxmemory-policy', 'noeviction']);
  assert.deepEqual(await redisWarnings(good), []);
});

test('start-up check: a Redis that refuses CONFIG gets one warning saying what to check', async (t) => {
  const redis = await ownRedis(t, ['--rename-command', 'CONFIG', '""']);
  const warnings = await redisWarnings(redis);
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /could not read Redis's configuration .* noeviction and persistence/);
});
