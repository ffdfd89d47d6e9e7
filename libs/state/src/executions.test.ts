import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { toStoredEvent } from './event-hub.ts';
import { EventWriter } from './event-writer.ts';
import { ExecutionStore, endingOf, newExecutionId, platformResult, type ExecutionMeta } from './executions.ts';
import { keys } from './keys.ts';
import { createRedis } from './redis.ts';
import { withScripts } from './scripts.ts';
import { SessionStore, newSessionId } from './sessions.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

function setup(t: { after(fn: () => Promise<void>): void }) {
  const prefix = `sgstate${randomBytes(4).toString('hex')}`;
  const redis = withScripts(createRedis(REDIS_URL, 'executions-test'));
  const k = keys(prefix);
  t.after(async () => {
    const found = await redis.keys(`${prefix}:*`);
    if (found.length) await redis.del(...found);
    redis.disconnect();
  });
  const executions = new ExecutionStore(redis, k, { retentionSeconds: 3600 });
  const meta = (sessionId: string): ExecutionMeta =>
    ({ id: newExecutionId(), tenant: 'acme', session_id: sessionId, language: 'python', created_at: Date.now(), timeout_ms: 1000 });
  return { redis, k, executions, sessions: new SessionStore(redis, k), meta };
}

const stream = async (redis: ReturnType<typeof setup>['redis'], key: string) =>
  ((await redis.xrange(key, '-', '+')) as [string, string[]][]).map(toStoredEvent);

test('a one-shot start creates its session and takes its lock in one step, within the tenant limit', async (t) => {
  const { executions, sessions, meta } = setup(t);
  const newSession = { ttlSeconds: 60, maxSessions: 1 };
  const first = meta(newSessionId());
  await executions.start(first, { newSession });
  const session = await sessions.require('acme', first.session_id);
  assert.equal(session.currentExecutionId, first.id);
  assert.equal(session.mode, 'process');
  assert.equal((await executions.get(first.id))?.state, 'queued');

  await assert.rejects(executions.start(meta(first.session_id)), { code: 'session_busy' });
  const over = meta(newSessionId());
  await assert.rejects(executions.start(over, { newSession }), { code: 'max_sessions' });
  assert.equal(await sessions.get('acme', over.session_id), null, 'a refused one-shot leaves no session behind');
  assert.equal(await executions.get(over.id), null);
  await assert.rejects(executions.start({ ...meta(first.session_id), tenant: 'other' }), { code: 'session_not_found' },
    'another tenant cannot use the session');
});

test('markRunning answers whether the run is still queued and whether a cancel came first', async (t) => {
  const { executions, meta } = setup(t);
  const plain = meta(newSessionId());
  await executions.start(plain, { newSession: { ttlSeconds: 60, maxSessions: 10 } });
  assert.equal(await executions.markRunning(plain.id, 'w1', 5000), 'running');
  assert.equal(await executions.markRunning(plain.id, 'w1', 5000), 'not_queued', 'a job that comes back is skipped');
  assert.deepEqual([...(await executions.leases()).live], [plain.id]);

  const cancelled = meta(newSessionId());
  await executions.start(cancelled, { newSession: { ttlSeconds: 60, maxSessions: 10 } });
  await executions.requestCancel(cancelled.id);
  assert.equal(await executions.markRunning(cancelled.id, 'w1', 5000), 'cancel_requested');

  const ended = meta(newSessionId());
  await executions.start(ended, { newSession: { ttlSeconds: 60, maxSessions: 10 } });
  assert.equal(await executions.finalize(ended, platformResult('cancelled', 'cancelled', 'cancelled before it started'), ['queued']), true);
  assert.equal(await executions.markRunning(ended.id, 'w1', 5000), 'not_queued');
  assert.equal(await executions.markRunning(newExecutionId(), 'w1', 5000), 'not_queued', 'an execution that was never started');
});

test('finalize writes the events still pending before done and result, once, and the result carries its times', async (t) => {
  const { redis, executions, sessions, meta } = setup(t);
  const m = meta(newSessionId());
  await executions.start(m, { newSession: { ttlSeconds: 60, maxSessions: 10 } });
  await executions.markRunning(m.id, 'w1', 5000);
  const events = new EventWriter(redis, executions.eventsKey(m.id));
  events.phase('starting');
  await events.flush();
  events.phase('running');
  events.stdout('1\n');
  events.phase('harvesting');
  const result = { ...platformResult('completed', undefined, 'ok'), exit_code: 0, stdout: '1\n' };
  assert.equal(await executions.finalize(m, result, ['running'], events.takePending()), true);
  await events.flush();
  assert.equal(await executions.finalize(m, platformResult('error', 'worker_lost', 'late'), ['running']), false, 'one result only');

  const evs = await stream(redis, executions.eventsKey(m.id));
  assert.deepEqual(evs.map((e) => (e.type === 'phase' ? JSON.parse(e.data).phase : e.type)),
    ['queued', 'starting', 'running', 'stdout', 'harvesting', 'done', 'result']);
  const rec = await executions.get(m.id);
  const ending = endingOf(evs.at(-1)!);
  assert.deepEqual(ending, { result: rec!.result, startedAt: rec!.started_at, finishedAt: rec!.finished_at });
  assert.equal(rec!.state, 'completed');
  assert.equal((await sessions.require('acme', m.session_id)).currentExecutionId, null, 'the lock is released');
});

test('a reader blocked on the stream wakes once for the events of one turn of the event loop', async (t) => {
  const { redis, k } = setup(t);
  const reader = createRedis(REDIS_URL, 'executions-test-reader');
  t.after(async () => { reader.disconnect(); });
  const key = k.events(newExecutionId());
  const woke = reader.xread('BLOCK', 5000, 'STREAMS', key, '$') as Promise<[string, [string, string[]][]][] | null>;
  await new Promise((r) => setTimeout(r, 100));
  const w = new EventWriter(redis, key);
  w.phase('starting');
  w.stdout('x');
  w.phase('running');
  await w.flush();
  const entries = (await woke)![0]![1];
  assert.deepEqual(entries.map((e) => toStoredEvent(e).type), ['phase', 'stdout', 'phase']);
});
