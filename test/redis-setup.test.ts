import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createRedis, redisWarnings } from '@sandgate/state';
import { freePort } from './redis-and-ports.ts';
import { until } from './harness.ts';

const run = promisify(execFile);
const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };
const START_REDIS = fileURLToPath(new URL('../scripts/start-redis.sh', import.meta.url));

test('the quick start\'s Redis keeps its data across a restart, evicts nothing and listens on loopback only', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-redis-setup-'));
  const port = await freePort();
  const start = () => run('bash', [START_REDIS, String(port)], { env: { ...process.env, SANDGATE_REDIS_DIR: dir } });
  const pid = async () => Number((await readFile(join(dir, 'redis.pid'), 'utf8')).trim());
  t.after(async () => {
    await pid().then((p) => process.kill(p, 'SIGKILL'), () => {});
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
