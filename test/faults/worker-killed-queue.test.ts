import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRedis } from '@sandgate/state';
import { REDIS_URL } from '../redis-and-ports.ts';
import { until } from '../harness.ts';
import { api, startDeployment, startWorkerProc } from './processes.ts';

test('a worker SIGKILLed with 2 runs running and 20 queued: every run ends exactly once, none is lost', async (t) => {
  const { d, gateway, worker } = await startDeployment(t, { SANDGATE_MAX_SESSIONS: '100' });
  const first = worker!;

  const long: string[] = [];
  for (let i = 0; i < 2; i++)
    long.push(
      (await api(gateway.url, 'POST', '/v1/executions', { language: 'python', code: 'import time\ntime.sleep(120)' }))
        .body.id as string,
    );
  await until(
    'both long runs to be running',
    async () =>
      (await Promise.all(long.map((id) => api(gateway.url, 'GET', `/v1/executions/${id}`)))).every(
        (r) => r.body.state === 'running',
      ),
    60_000,
  );
  const queued: string[] = [];
  for (let i = 0; i < 20; i++) {
    const r = await api(gateway.url, 'POST', '/v1/executions', { language: 'python', code: `print(${i})` });
    assert.equal(r.status, 202);
    queued.push(r.body.id);
  }
  const stats = await api(gateway.url, 'GET', '/v1/system/stats');
  assert.equal(stats.body.executions.running, 2);
  assert.equal(stats.body.executions.queued, 20, 'the worker is busy: the 20 wait in the queue');

  first.kill('SIGKILL');
  await first.exited;
  const second = await startWorkerProc(d.env);
  t.after(() => second.kill('SIGKILL'));

  const all = [...long, ...queued];
  const ended = await until(
    'every run to end',
    async () => {
      const rs = await Promise.all(all.map((id) => api(gateway.url, 'GET', `/v1/executions/${id}`)));
      return rs.every((r) => r.body.result) ? rs.map((r) => r.body) : null;
    },
    120_000,
    500,
  );
  for (const e of ended.slice(0, 2)) assert.deepEqual([e.state, e.result.reason], ['error', 'worker_lost']);
  ended.slice(2).forEach((e, i) => {
    assert.equal(e.state, 'completed', JSON.stringify(e.result));
    assert.equal(e.result.stdout, `${i}\n`);
  });

  // Exactly once: one `result` and one `done` per run, and the deployment counted 22 endings, no more.
  const redis = createRedis(REDIS_URL, 'fault-check');
  t.after(() => redis.disconnect());
  for (const id of all) {
    const events = (await redis.xrange(`${d.prefix}:execution:${id}:events`, '-', '+')).map(([, f]) => f);
    const types = events.map((f) => f[f.indexOf('type') + 1]);
    assert.equal(types.filter((x) => x === 'result').length, 1, id);
    assert.equal(events.filter((f) => f.join(' ').includes('"phase":"running"')).length <= 1, true, id);
  }
  const after = await until(
    'the endings to be counted',
    async () => {
      const s = (await api(gateway.url, 'GET', '/v1/system/stats')).body;
      return s.executions.completed + s.executions.error === 22 ? s : null;
    },
    10_000,
  );
  assert.deepEqual([after.executions.completed, after.executions.error], [20, 2]);
  assert.equal(after.executions.queued, 0);
});
