import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createRedis } from './redis.ts';
import { keys } from './keys.ts';
import { DeploymentStats } from './deployment-stats.ts';
import { platformResult } from './executions.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

test('runs ended are counted by state and reason; durations and queue waits land in cumulative buckets', async (t) => {
  const redis = createRedis(REDIS_URL, 'stats-test');
  const k = keys(`sgtest${randomBytes(4).toString('hex')}`);
  t.after(async () => {
    await redis.del(k.statsCounters(), k.statsHistogram('duration'), k.statsHistogram('queue_wait'));
    redis.disconnect();
  });
  const stats = new DeploymentStats(redis, k);
  const ok = { ...platformResult('completed', undefined, ''), duration_ms: 40 };
  await stats.ended('python', ok);
  await stats.ended('python', { ...ok, duration_ms: 3000 });
  await stats.ended('bash', platformResult('error', 'worker_lost', 'lost'));
  await stats.queueWait(2);
  await stats.add([
    ['pool', { event: 'hit' }, 3],
    ['pool', { event: 'miss' }, 0],
    ['engine_errors', {}, 2],
  ]);
  await stats.add([['pool', { event: 'hit' }, 2]]);

  const read = await stats.read();
  const runs = read.counters.get('executions')!;
  assert.deepEqual(
    runs.find((c) => c.labels.state === 'completed'),
    { labels: { state: 'completed', reason: '' }, value: 2 },
  );
  assert.deepEqual(
    runs.find((c) => c.labels.state === 'error'),
    { labels: { state: 'error', reason: 'worker_lost' }, value: 1 },
  );
  assert.deepEqual(read.counters.get('pool'), [{ labels: { event: 'hit' }, value: 5 }], 'a zero delta writes nothing');
  assert.equal(read.counters.get('engine_errors')![0]!.value, 2);

  const python = read.histograms.get('duration')!.find((h) => h.labels.language === 'python')!;
  assert.equal(python.count, 2);
  assert.ok(Math.abs(python.sum - 3.04) < 1e-9);
  const at = (le: string) => python.buckets.find((b) => b.le === le)!.count;
  assert.equal(at('0.025'), 0);
  assert.equal(at('0.05'), 1);
  assert.equal(at('2.5'), 1);
  assert.equal(at('5'), 2);
  assert.equal(at('+Inf'), 2);
  const wait = read.histograms.get('queue_wait')![0]!;
  assert.deepEqual(wait.labels, {});
  assert.equal(wait.buckets.find((b) => b.le === '0.001')!.count, 0);
  assert.equal(wait.buckets.find((b) => b.le === '0.005')!.count, 1);
});
