import { test } from 'node:test';
import assert from 'node:assert/strict';
import { probeHealth } from './health.ts';

const why = (err: unknown) => `failed: ${(err as Error).message}`;

test('a probe that answers is usable; one that fails says why', async () => {
  assert.deepEqual(await probeHealth({ what: 'engine', timeoutMs: 1000, call: async () => 'OK', why }), {
    usable: true,
  });
  const failed = await probeHealth({
    what: 'engine',
    timeoutMs: 1000,
    call: async () => {
      throw new Error('connect ENOENT /nowhere.sock');
    },
    why,
  });
  assert.deepEqual(failed, { usable: false, reason: 'failed: connect ENOENT /nowhere.sock' });
});

test('a probe answers within its timeout, aborting a call that honours its signal and outliving one that does not', async () => {
  let aborted = false;
  const started = Date.now();
  const honours = await probeHealth({
    what: 'engine',
    timeoutMs: 100,
    call: (signal) =>
      new Promise((_, reject) =>
        signal.addEventListener('abort', () => {
          aborted = true;
          reject(new Error('The operation was aborted'));
        }),
      ),
    why,
  });
  assert.deepEqual(honours, { usable: false, reason: 'engine did not answer within 100 ms' });
  assert.ok(aborted, 'the call was told to stop');
  const ignores = await probeHealth({ what: 'API server', timeoutMs: 100, call: () => new Promise(() => {}), why });
  assert.deepEqual(ignores, { usable: false, reason: 'API server did not answer within 100 ms' });
  assert.ok(Date.now() - started < 1000, `both answered in ${Date.now() - started} ms`);
});
