import { test } from 'node:test';
import assert from 'node:assert/strict';
import Dockerode from 'dockerode';
import { until } from '../harness.ts';
import { api, ownRedis, startDeployment } from './processes.ts';

const docker = new Dockerode();

test('Redis restarted (AOF) with runs running and queued: they all run, results are kept, /readyz says not ready meanwhile', async (t) => {
  const redis = await ownRedis();
  t.after(() => redis.close());
  const { d, gateway } = await startDeployment(t, { REDIS_URL: redis.url });
  await until('/readyz to be ready', async () => (await api(gateway.url, 'GET', '/readyz')).status === 200, 30_000);

  // Two runs that end while Redis is away, and four queued behind them (the worker runs two at a time).
  const running: string[] = [];
  for (let i = 0; i < 2; i++) {
    running.push(
      (
        await api(gateway.url, 'POST', '/v1/executions', {
          language: 'python',
          code: `import time\ntime.sleep(3)\nprint("slept ${i}")`,
        })
      ).body.id,
    );
  }
  const queued: string[] = [];
  for (let i = 0; i < 4; i++)
    queued.push(
      (await api(gateway.url, 'POST', '/v1/executions', { language: 'python', code: `print(${i})` })).body.id,
    );
  await until(
    'both slow runs to be running',
    async () =>
      (await Promise.all(running.map((id) => api(gateway.url, 'GET', `/v1/executions/${id}`)))).every(
        (r) => r.body.state === 'running',
      ),
    60_000,
  );

  await redis.stop('SIGTERM');
  const ready = await api(gateway.url, 'GET', '/readyz');
  assert.equal(ready.status, 503);
  assert.equal(ready.body.code, 'not_ready');
  // The slow runs end during the outage: their sandboxes go, their results wait in the worker for Redis.
  await until(
    "the slow runs' sandboxes to be gone",
    async () => {
      const left = await docker.listContainers({
        all: true,
        filters: { label: [`org.sandgate.deployment=${d.prefix}`] },
      });
      return left.length === 0;
    },
    30_000,
  );
  assert.equal((await api(gateway.url, 'GET', '/readyz')).status, 503, 'still not ready while Redis is down');
  const during = await api(gateway.url, 'GET', `/v1/executions/${running[0]}`);
  assert.equal(during.body.code, 'redis_unavailable');

  await redis.start();
  await until(
    '/readyz to be ready again',
    async () => (await api(gateway.url, 'GET', '/readyz')).status === 200,
    30_000,
  );
  const ended = await until(
    'every run to end',
    async () => {
      const rs = await Promise.all(
        [...running, ...queued].map((id) => api(gateway.url, 'GET', `/v1/executions/${id}`)),
      );
      return rs.every((r) => r.body.result) ? rs.map((r) => r.body) : null;
    },
    60_000,
    250,
  );
  assert.deepEqual(
    ended.map((e) => e.state),
    Array(6).fill('completed'),
    JSON.stringify(ended.map((e) => e.result)),
  );
  assert.deepEqual(
    ended.slice(0, 2).map((e) => e.result.stdout),
    ['slept 0\n', 'slept 1\n'],
  );
  assert.deepEqual(
    ended.slice(2).map((e) => e.result.stdout),
    ['0\n', '1\n', '2\n', '3\n'],
  );

  const after = await api(gateway.url, 'POST', '/v1/executions?wait=60', {
    language: 'python',
    code: 'print("after")',
  });
  assert.equal(after.body.result?.stdout, 'after\n', 'a new run after the restart');
});
