import { test } from 'node:test';
import assert from 'node:assert/strict';
import { podName } from '@sandgate/backends/testing';
import { startStack, type Stack } from '../harness.ts';
import type { ApiCall } from './cluster.ts';

/** Cold one-shots counted, after one that warms the worker (its watch's list, the first connection). */
const RUNS = 5;
/** The bound on API calls of a one-shot in a Pod of its own (docs/performance.md, the Kubernetes backend). */
const BOUND = 6;

const run = async (s: Stack, code: string) => {
  const res = await s.api('POST', '/v1/executions?wait=90', { language: 'python', code });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.result.state, 'completed', JSON.stringify(res.body.result));
  return res.body as { id: string };
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * What a cold one-shot costs the API server, counted from its audit log (every request of the stack's worker
 * identity, whatever the machine's load): a count, not a time. The run's own calls are those naming its Pod or
 * Secret; any other call made meanwhile (a health probe, a sweep's list) is the worker's background, counted too.
 */
test('kubernetes: a cold one-shot costs at most 6 API calls, none of them a poll of its Pod', async (t) => {
  const s = await startStack({ backend: 'kubernetes', env: { SANDGATE_POOL_SIZE: '0' } });
  t.after(() => s.close());
  const ns = s.cluster!;
  await run(s, 'print(1)');
  const totals: number[] = [];
  const seen: string[] = [];
  for (let i = 0; i < RUNS; i++) {
    const before = (await ns.calls()).length;
    const { id } = await run(s, 'print(1)');
    const calls = (await ns.calls()).slice(before);
    const own = (c: ApiCall) =>
      c.name === podName(id) || (c.resource === 'secrets' && c.name?.startsWith(podName(id)) === true);
    const what = (c: ApiCall) =>
      c.resource === 'pods/log' ? `get pods/log ${c.query.container}` : `${c.verb} ${c.resource}`;
    const mine = calls.filter(own).map(what);
    const count = (v: string) => mine.filter((m) => m === v).length;
    const detail = JSON.stringify(calls.map(what));
    assert.equal(count('create pods'), 1, detail);
    assert.equal(count('create secrets'), 1, detail);
    assert.equal(count('delete pods'), 1, detail);
    assert.equal(count('get pods'), 0, `no poll of the Pod: ${detail}`);
    assert.ok(count('get pods/log harvest') >= 1 && count('get pods/log runner') >= 1, detail);
    assert.equal(mine.length, calls.filter(own).length);
    // The worker's health probe answers from the run's own calls, and its sweep looks through its watch.
    assert.deepEqual(calls.filter((c) => !own(c)).map(what), [], 'no background call during a run');
    totals.push(calls.length);
    seen.push(detail);
  }
  // A median: a runner slowed by the machine's load gets one more read of its output per 500 ms it runs.
  assert.ok(median(totals) <= BOUND, `calls per cold one-shot: ${totals.join(', ')}\n${seen.join('\n')}`);
  t.diagnostic(`API calls per cold one-shot: ${totals.join(', ')}`);
});
