import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { toStoredEvent } from './event-hub.ts';
import { EventWriter } from './event-writer.ts';
import type { ExecutionJob } from '@sandgate/contracts';
import {
  ExecutionStore,
  endingOf,
  newExecutionId,
  platformResult,
  type ExecutionMeta,
  type StartOptions,
} from './executions.ts';
import { keys } from './keys.ts';
import { createRedis } from './redis.ts';
import { withLuaScripts } from './lua-scripts.ts';
import { SessionStore, newSessionId } from './sessions.ts';
import { DeploymentStats } from './deployment-stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

function setup(t: { after(fn: () => Promise<void>): void }) {
  const prefix = `sgstate${randomBytes(4).toString('hex')}`;
  const redis = withLuaScripts(createRedis(REDIS_URL, 'executions-test'));
  const k = keys(prefix);
  t.after(async () => {
    const found = await redis.keys(`${prefix}:*`);
    if (found.length) await redis.del(...found);
    redis.disconnect();
  });
  const executions = new ExecutionStore(redis, k, { retentionSeconds: 3600 });
  const meta = (sessionId: string): ExecutionMeta => ({
    id: newExecutionId(),
    tenant: 'acme',
    session_id: sessionId,
    language: 'python',
    created_at: Date.now(),
    timeout_ms: 1000,
  });
  return { redis, k, executions, sessions: new SessionStore(redis, k), meta };
}

/** The spec a gateway records with a run: what the worker gets back from markRunning. */
const specOf = (m: ExecutionMeta): ExecutionJob => ({
  execution_id: m.id,
  tenant: m.tenant,
  session_id: m.session_id,
  language: 'python',
  code: 'print(1)',
  timeout_ms: 1000,
  memory_mb: 64,
  cpus: 1,
  env: { TOKEN: 'secret' },
  stdin: null,
  sandbox: 'oneshot',
  generation: 0,
});
const oneshot: StartOptions = { maxSessions: 10, maxInFlight: 0, oneshotTtlSeconds: 60 };
const inSession: StartOptions = { maxSessions: 10, maxInFlight: 0 };

const stream = async (redis: ReturnType<typeof setup>['redis'], key: string) =>
  ((await redis.xrange(key, '-', '+')) as [string, string[]][]).map(toStoredEvent);

test('a one-shot start creates its session and takes its lock in one step; the session counts as no live one', async (t) => {
  const { executions, sessions, meta } = setup(t);
  const first = meta(newSessionId());
  await executions.start(first, specOf(first), { ...oneshot, maxSessions: 1 });
  const session = await sessions.require('acme', first.session_id);
  assert.equal(session.currentExecutionId, first.id);
  assert.equal(session.mode, 'process');
  assert.equal(session.oneshot, true);
  assert.equal((await executions.get(first.id))?.state, 'queued');

  await assert.rejects(executions.start(meta(first.session_id), specOf(first), inSession), { code: 'session_busy' });
  const second = meta(newSessionId());
  await executions.start(second, specOf(second), { ...oneshot, maxSessions: 1 });
  await sessions.create('acme', { ttlSeconds: 60, maxSessions: 1 });
  await assert.rejects(sessions.create('acme', { ttlSeconds: 60, maxSessions: 1 }), { code: 'max_sessions' });
  assert.equal((await sessions.page('acme', null, 10)).items.length, 1, 'only the real session is listed');
  await assert.rejects(
    executions.start({ ...meta(first.session_id), tenant: 'other' }, specOf(first), inSession),
    { code: 'session_not_found' },
    'another tenant cannot use the session',
  );
});

test("a tenant at maxInFlight is refused with quota_exceeded; ranks interleave tenants and keep each one's order", async (t) => {
  const { executions, meta } = setup(t);
  const limit: StartOptions = { ...oneshot, maxInFlight: 3 };
  const ranks: number[] = [];
  const runs: ExecutionMeta[] = [];
  for (let i = 0; i < 3; i++) {
    const m = meta(newSessionId());
    runs.push(m);
    ranks.push(await executions.start(m, specOf(m), limit));
  }
  assert.deepEqual(ranks, [1, 2, 3]);
  const over = meta(newSessionId());
  await assert.rejects(executions.start(over, specOf(over), limit), { code: 'quota_exceeded' });
  assert.equal(await executions.get(over.id), null, 'a refused run leaves no record');
  const other = { ...meta(newSessionId()), tenant: 'globex' };
  assert.equal(await executions.start(other, specOf(other), limit), 1, "another tenant's first run ranks first");

  const started = await executions.markRunning(runs[0]!.id, 'acme', 'w1', 5000, 0);
  assert.equal(started.state, 'running');
  const again = meta(newSessionId());
  await assert.rejects(executions.start(again, specOf(again), limit), { code: 'quota_exceeded' }, 'running counts too');
  await executions.finalize(runs[0]!, platformResult('completed', undefined, 'ok'), ['running']);
  assert.equal(await executions.start(again, specOf(again), limit), 4, "after the tenant's queued ones");
});

test('markRunning holds a run back while its tenant runs maxRunning, and hands the spec over once', async (t) => {
  const { executions, redis, k, meta } = setup(t);
  const a = meta(newSessionId());
  const b = meta(newSessionId());
  await executions.start(a, specOf(a), oneshot);
  await executions.start(b, specOf(b), oneshot);
  const first = await executions.markRunning(a.id, 'acme', 'w1', 5000, 1);
  assert.equal(first.state, 'running');
  assert.deepEqual(first.state === 'running' && first.job, specOf(a));
  assert.equal((await executions.markRunning(b.id, 'acme', 'w1', 5000, 1)).state, 'throttled');
  assert.equal((await executions.get(b.id))?.state, 'queued', 'a throttled run stays queued');
  await executions.finalize(a, platformResult('completed', undefined, 'ok'), ['running']);
  assert.equal(await redis.hget(k.execution(a.id), 'spec'), null, 'code, env and stdin go when the run ends');
  assert.equal((await executions.markRunning(b.id, 'acme', 'w1', 5000, 1)).state, 'running');
});

test('markRunning answers whether the run is still queued and whether a cancel came first', async (t) => {
  const { executions, meta } = setup(t);
  const plain = meta(newSessionId());
  await executions.start(plain, specOf(plain), oneshot);
  assert.equal((await executions.markRunning(plain.id, 'acme', 'w1', 5000, 0)).state, 'running');
  assert.equal(
    (await executions.markRunning(plain.id, 'acme', 'w1', 5000, 0)).state,
    'not_queued',
    'a job that comes back is skipped',
  );
  assert.deepEqual([...(await executions.leases()).live], [plain.id]);

  const cancelled = meta(newSessionId());
  await executions.start(cancelled, specOf(cancelled), oneshot);
  await executions.requestCancel(cancelled.id);
  assert.equal((await executions.markRunning(cancelled.id, 'acme', 'w1', 5000, 0)).state, 'cancel_requested');

  const ended = meta(newSessionId());
  await executions.start(ended, specOf(ended), oneshot);
  assert.equal(
    await executions.finalize(ended, platformResult('cancelled', 'cancelled', 'cancelled before it started'), [
      'queued',
    ]),
    true,
  );
  assert.equal((await executions.markRunning(ended.id, 'acme', 'w1', 5000, 0)).state, 'not_queued');
  assert.equal(
    (await executions.markRunning(newExecutionId(), 'acme', 'w1', 5000, 0)).state,
    'not_queued',
    'an execution that was never started',
  );
});

test('finalize writes the events still pending before done and result, once, and the result carries its times', async (t) => {
  const { redis, executions, sessions, meta } = setup(t);
  const m = meta(newSessionId());
  await executions.start(m, specOf(m), oneshot);
  await executions.markRunning(m.id, 'acme', 'w1', 5000, 0);
  const events = new EventWriter(redis, executions.eventsKey(m.id));
  events.phase('starting');
  await events.flush();
  events.phase('running');
  events.stdout('1\n');
  events.phase('harvesting');
  const result = { ...platformResult('completed', undefined, 'ok'), exit_code: 0, stdout: '1\n' };
  assert.equal(await executions.finalize(m, result, ['running'], events.takePending()), true);
  await events.flush();
  assert.equal(
    await executions.finalize(m, platformResult('error', 'worker_lost', 'late'), ['running']),
    false,
    'one result only',
  );

  const evs = await stream(redis, executions.eventsKey(m.id));
  assert.deepEqual(
    evs.map((e) => (e.type === 'phase' ? JSON.parse(e.data).phase : e.type)),
    ['queued', 'starting', 'running', 'stdout', 'harvesting', 'done', 'result'],
  );
  const rec = await executions.get(m.id);
  const ending = endingOf(evs.at(-1)!);
  assert.deepEqual(ending, { result: rec!.result, startedAt: rec!.started_at, finishedAt: rec!.finished_at });
  assert.equal(rec!.state, 'completed');
  assert.equal((await sessions.require('acme', m.session_id)).currentExecutionId, null, 'the lock is released');
});

test('start refuses a tenant whose files are over its storage quota, and records nothing; at the quota runs run', async (t) => {
  const { executions, redis, k, meta } = setup(t);
  await redis.hset(k.tenantStorage('acme'), 'sess_a', '600', 'sess_b', '400');
  const over = meta(newSessionId());
  await assert.rejects(executions.start(over, specOf(over), { ...oneshot, maxStorageBytes: 999 }), {
    code: 'storage_quota_exceeded',
    message: /files take 1000 bytes, over its storage quota of 999 bytes/,
  });
  assert.equal(await executions.get(over.id), null, 'a refused run leaves no record');
  // At the quota exactly, a run still runs: it is how a paused session whose bytes are counted comes back.
  const at = meta(newSessionId());
  assert.equal(await executions.start(at, specOf(at), { ...oneshot, maxStorageBytes: 1000 }), 1);
  const other = { ...meta(newSessionId()), tenant: 'globex' };
  assert.equal(
    await executions.start(other, specOf(other), { ...oneshot, maxStorageBytes: 1 }),
    1,
    "another tenant's files do not count",
  );
  const unlimited = meta(newSessionId());
  assert.equal(await executions.start(unlimited, specOf(unlimited), { ...oneshot, maxStorageBytes: 0 }), 2);
});

test('the start of a run observes its queue wait, and its ending is counted once, with its storage, in the same step', async (t) => {
  const { executions, redis, k, meta } = setup(t);
  const stats = new DeploymentStats(redis, k);
  const m = meta(newSessionId());
  await executions.start(m, specOf(m), oneshot);
  assert.equal((await executions.markRunning(m.id, 'acme', 'w1', 5000, 0, 7)).state, 'running');
  assert.equal((await executions.markRunning(m.id, 'acme', 'w1', 5000, 0, 7)).state, 'not_queued');
  const result = { ...platformResult('completed', undefined, 'ok'), exit_code: 0, duration_ms: 30 };
  assert.equal(await executions.finalize(m, result, ['running'], [], { storageBytes: 4096 }), true);
  assert.equal(
    await executions.finalize(m, platformResult('error', 'worker_lost', 'late'), ['running'], [], { storageBytes: 0 }),
    false,
  );
  const read = await stats.read();
  assert.deepEqual(read.counters.get('executions'), [{ labels: { state: 'completed', reason: '' }, value: 1 }]);
  const wait = read.histograms.get('queue_wait')![0]!;
  assert.equal(wait.count, 1, 'a run that did not start again is not observed again');
  assert.equal(wait.buckets.find((b) => b.le === '0.01')!.count, 1);
  assert.equal(wait.buckets.find((b) => b.le === '0.005')!.count, 0);
  const duration = read.histograms.get('duration')!;
  assert.deepEqual(
    duration.map((h) => [h.labels, h.count, h.sum]),
    [[{ language: 'python', state: 'completed' }, 1, 0.03]],
  );
  assert.equal(
    await redis.hget(k.tenantStorage('acme'), m.session_id),
    '0',
    'the last measure is recorded, whoever ended the run',
  );
  const measured = meta(newSessionId());
  await executions.start(measured, specOf(measured), oneshot);
  await executions.finalize(measured, result, ['queued']);
  assert.equal(await redis.hget(k.tenantStorage('acme'), measured.session_id), null, 'no measure, no record');
});

test('a reader blocked on the stream wakes once for the events of one turn of the event loop', async (t) => {
  const { redis, k } = setup(t);
  const reader = createRedis(REDIS_URL, 'executions-test-reader');
  t.after(async () => {
    reader.disconnect();
  });
  const key = k.events(newExecutionId());
  const woke = reader.xread('BLOCK', 5000, 'STREAMS', key, '$') as Promise<[string, [string, string[]][]][] | null>;
  await new Promise((r) => setTimeout(r, 100));
  const w = new EventWriter(redis, key);
  w.phase('starting');
  w.stdout('x');
  w.phase('running');
  await w.flush();
  const entries = (await woke)![0]![1];
  assert.deepEqual(
    entries.map((e) => toStoredEvent(e).type),
    ['phase', 'stdout', 'phase'],
  );
});
