import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newExecutionId } from '@sandgate/state';
import { OPEN_TENANT } from '@sandgate/config';
import { startStack, until } from './harness.ts';
import { noopBackend } from './noop-backend.ts';

test('before a worker takes them: refused runs leave no job, a queued run can be cancelled and is then skipped', async (t) => {
  const s = await startStack({ worker: false });
  t.after(() => s.close());
  const queued = async () => {
    const counts = await s.deps.queue.getJobCounts('wait', 'prioritized', 'delayed');
    return counts.wait! + counts.prioritized! + counts.delayed!;
  };

  const first = await s.api('POST', '/v1/executions', { language: 'python', code: 'print(1)' });
  assert.equal(first.status, 202);
  assert.equal(first.body.state, 'queued');
  const sessionId = first.body.session_id as string;
  assert.equal(await queued(), 1);

  const busy = await s.api('POST', '/v1/executions?wait=5', {
    language: 'python',
    code: 'print(2)',
    session_id: sessionId,
  });
  assert.equal(busy.status, 409);
  assert.equal(busy.body.code, 'session_busy');
  assert.equal(await queued(), 1, 'the job sent along with the refused start was removed');

  const waited = Date.now();
  const timedOut = await s.api('POST', '/v1/executions?wait=0.5', { language: 'python', code: 'print(3)' });
  assert.equal(timedOut.status, 202, 'no worker: the wait runs out');
  assert.equal(timedOut.body.state, 'queued');
  assert.ok(Date.now() - waited >= 450, 'it waited');

  const cancelled = await s.api('POST', `/v1/executions/${first.body.id}/cancel`);
  assert.equal(cancelled.body.state, 'cancelled');
  assert.equal(cancelled.body.result.reason, 'cancelled');

  await s.startWorker();
  const next = await s.api('POST', '/v1/executions?wait=60', {
    language: 'python',
    code: 'print("next")',
    session_id: sessionId,
  });
  assert.equal(next.status, 200, 'the cancelled run released the session');
  assert.equal(next.body.result.stdout, 'next\n');
  await until('the worker to drain the queue', async () => (await queued()) === 0);
  const after = await s.api('GET', `/v1/executions/${first.body.id}`);
  assert.equal(after.body.state, 'cancelled', 'the worker skipped the cancelled job');
  assert.equal(after.body.started_at, null);
});

test('?wait answers with the finished run, and GET ?wait with the same record', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const ran = await s.api('POST', '/v1/executions?wait=60', {
    language: 'python',
    code: 'import sys; print("out"); print("err", file=sys.stderr)',
  });
  assert.equal(ran.status, 200);
  assert.equal(ran.body.state, 'completed');
  assert.equal(ran.body.result.stdout, 'out\n');
  assert.equal(ran.body.result.stderr, 'err\n');
  const read = await s.api('GET', `/v1/executions/${ran.body.id}?wait=5`);
  assert.deepEqual(read.body, ran.body, 'what the waiting request answered is the stored record');

  const failed = await s.api('POST', '/v1/executions?wait=60', {
    language: 'python',
    code: 'raise SystemExit(3)',
    session_id: ran.body.session_id,
  });
  assert.equal(failed.body.state, 'failed');
  assert.equal(failed.body.result.exit_code, 3);
  assert.ok(Date.parse(failed.body.started_at) <= Date.parse(failed.body.finished_at));
});

test('a run recorded but never enqueued (its gateway died in between) is ended by housekeeping and frees its session', async (t) => {
  const s = await startStack({ worker: noopBackend });
  t.after(() => s.close());
  const session = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const meta = {
    id: newExecutionId(),
    tenant: OPEN_TENANT,
    session_id: session,
    language: 'python',
    created_at: Date.now(),
    timeout_ms: 1000,
  };
  const spec = {
    ...meta,
    execution_id: meta.id,
    language: 'python' as const,
    code: 'print(1)',
    memory_mb: 64,
    cpus: 1,
    env: {},
    stdin: null,
    sandbox: 'session' as const,
    generation: 0,
  };
  await s.deps.executions.start(meta, spec, { maxSessions: 10, maxInFlight: 0 });
  const busy = await s.api('POST', '/v1/executions', { language: 'python', code: 'print(2)', session_id: session });
  assert.equal(busy.body.code, 'session_busy', 'the stranded run holds the session');

  const ended = await until(
    'housekeeping to end the stranded run',
    async () => {
      const r = await s.api('GET', `/v1/executions/${meta.id}`);
      return r.body.result ? r.body : null;
    },
    30_000,
  );
  assert.equal(ended.state, 'error');
  assert.equal(ended.result.reason, 'backend_unavailable');
  assert.match(ended.result.message, /never queued/);
  assert.ok(
    Date.parse(ended.finished_at) - meta.created_at >= 3 * s.config.leaseMs,
    'not before the grace of three leases',
  );
  const next = await s.api('POST', '/v1/executions?wait=30', {
    language: 'python',
    code: 'print(3)',
    session_id: session,
  });
  assert.equal(next.status, 200, 'the session is free again');
});
