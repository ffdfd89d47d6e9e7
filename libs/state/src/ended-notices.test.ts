import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { EndedNotices } from './ended-notices.ts';
import { ExecutionStore, newExecutionId, platformResult } from './executions.ts';
import { keys } from './keys.ts';
import { createRedis } from './redis.ts';
import { withLuaScripts } from './lua-scripts.ts';
import { newSessionId } from './sessions.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

async function setup(t: { after(fn: () => Promise<void>): void }) {
  const prefix = `sgnotice${randomBytes(4).toString('hex')}`;
  const k = keys(prefix);
  const redis = withLuaScripts(createRedis(REDIS_URL, 'notices-test'));
  const sub = createRedis(REDIS_URL, 'notices-test-sub');
  const notices = new EndedNotices(sub, k);
  await notices.listen();
  t.after(async () => {
    notices.close();
    const found = await redis.keys(`${prefix}:*`);
    if (found.length) await redis.del(...found);
    redis.disconnect();
  });
  const executions = new ExecutionStore(redis, k, { retentionSeconds: 3600 });
  /** A run started with (or without) this process as the one to notify. */
  const started = async (notify: boolean) => {
    const meta = {
      id: newExecutionId(),
      tenant: 'acme',
      session_id: newSessionId(),
      language: 'python',
      created_at: Date.now(),
      timeout_ms: 1000,
    };
    const wait = notices.expect(meta.id);
    t.after(async () => wait.cancel());
    const spec = {
      ...meta,
      execution_id: meta.id,
      language: 'python' as const,
      code: '',
      memory_mb: 64,
      cpus: 1,
      env: {},
      stdin: null,
      sandbox: 'oneshot' as const,
      generation: 0,
    };
    await executions.start(meta, spec, {
      maxSessions: 10,
      maxInFlight: 0,
      oneshotTtlSeconds: 60,
      ...(notify ? { notify: notices.channel } : {}),
    });
    return { meta, wait };
  };
  return { notices, sub, executions, started };
}

test('the process told at start learns how the run ended, with the times of its record', async (t) => {
  const { executions, started } = await setup(t);
  const { meta, wait } = await started(true);
  await executions.markRunning(meta.id, 'acme', 'w1', 5000, 0);
  const result = { ...platformResult('failed', undefined, 'boom'), exit_code: 1, stderr: 'Traceback …\n' };
  await executions.finalize(meta, result, ['running']);
  const notice = await wait.next(Date.now() + 5000);
  const rec = await executions.get(meta.id);
  assert.deepEqual(notice, { result, startedAt: rec!.started_at, finishedAt: rec!.finished_at });
  assert.ok(rec!.started_at !== null);
});

test('a run ended before it started notifies too; a run started without a channel does not', async (t) => {
  const { executions, started } = await setup(t);
  const told = await started(true);
  const silent = await started(false);
  const cancelled = platformResult('cancelled', 'cancelled', 'cancelled before it started');
  await executions.finalize(told.meta, cancelled, ['queued']);
  await executions.finalize(silent.meta, cancelled, ['queued']);
  assert.deepEqual(await told.wait.next(Date.now() + 5000), {
    result: cancelled,
    startedAt: null,
    finishedAt: (await executions.get(told.meta.id))!.finished_at,
  });
  assert.equal(await silent.wait.next(Date.now() + 300), 'timeout');
});

test('after a reconnect every waiter hears it may have missed its notice, and later notices still arrive', async (t) => {
  const { sub, executions, started } = await setup(t);
  const { meta, wait } = await started(true);
  sub.disconnect(true);
  assert.equal(await wait.next(Date.now() + 5000), 'missed');
  await executions.finalize(meta, platformResult('cancelled', 'cancelled', 'cancelled before it started'), ['queued']);
  const notice = await wait.next(Date.now() + 5000);
  assert.equal(typeof notice === 'object' && notice.result.state, 'cancelled');
});
