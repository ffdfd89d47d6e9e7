import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';
import { noopBackend } from './noop-backend.ts';

const keyA = 'a'.repeat(32);
const keyB = 'b'.repeat(32);

/**
 * The bound: runs are taken in order of their rank in their tenant's queue (BullMQ priority, lower first; ties in
 * order of arrival). B's first run ranks 1, after only A's rank-1 run, so it starts among the first `concurrency`
 * runs the worker takes: it waits for at most one run of A plus the runs already active — here none, so about one
 * no-op run (milliseconds), where first-in-first-out would make it wait for all 500.
 */
test("a burst of 500 queued runs of tenant A does not starve tenant B's one run", async (t) => {
  const concurrency = 2;
  const s = await startStack({
    worker: false,
    env: {
      SANDGATE_API_KEYS: `${keyA}:tenantA,${keyB}:tenantB`,
      SANDGATE_WORKER_CONCURRENCY: String(concurrency),
      SANDGATE_TENANT_MAX_QUEUED: '1000',
      SANDGATE_TENANT_RUNS_PER_MIN: '0',
      SANDGATE_RATE_LIMIT_PER_MIN: '0',
    },
  });
  t.after(() => s.close());
  const post = (key: string) =>
    s.api('POST', '/v1/executions', { language: 'python', code: 'print(1)' }, { authorization: `Bearer ${key}` });
  const a: string[] = [];
  for (let batch = 0; batch < 10; batch++) {
    const rs = await Promise.all(Array.from({ length: 50 }, () => post(keyA)));
    for (const r of rs) {
      assert.equal(r.status, 202, JSON.stringify(r.body));
      a.push(r.body.id);
    }
  }
  const b = await post(keyB);
  assert.equal(b.status, 202);

  const workerStarted = Date.now();
  await s.startWorker(noopBackend);
  const ended = await s.api('GET', `/v1/executions/${b.body.id}?wait=60`, undefined, {
    authorization: `Bearer ${keyB}`,
  });
  assert.equal(ended.body.state, 'completed');
  const bStarted = Date.parse(ended.body.started_at);
  const startsOfA = await Promise.all(a.map(async (id) => s.deps.executions.get(id)));
  const aBefore = startsOfA.filter((r) => r?.started_at !== null && r!.started_at! < bStarted).length;
  t.diagnostic(`B started ${bStarted - workerStarted} ms after the worker, after ${aBefore} of A's 500 runs`);
  assert.ok(aBefore <= concurrency, `${aBefore} runs of A started before B's; the bound is ${concurrency}`);
});
