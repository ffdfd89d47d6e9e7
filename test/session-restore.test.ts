import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, until, type Stack } from './harness.ts';
import { readSse } from './sse-client.ts';

// Saved variables are the session's own code when they load: a __setstate__ can sleep, raise or end the interpreter.
// Whatever it does, the run that loads them ends within its time limit, says why, and the session goes on.
const KEY = 'restore-test-key-0123456789ab';
const HANGS =
  'class Stuck:\n' +
  '    def __getstate__(self): return {"x": 1}\n' +
  '    def __setstate__(self, st): __import__("time").sleep(1000)\n' +
  'stuck = Stuck()\nkept = 5\n';

async function stateful(s: Stack, code: string): Promise<string> {
  const id = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
  const setup = await s.api('POST', '/v1/executions?wait=60', { session_id: id, language: 'python', code });
  assert.equal(setup.body.result?.state, 'completed', JSON.stringify(setup.body));
  const paused = await s.api('POST', `/v1/sessions/${id}/pause`);
  assert.equal(paused.status, 200, JSON.stringify(paused.body));
  assert.ok(paused.body.variables.saved >= 2, JSON.stringify(paused.body.variables));
  return id;
}

const run = (s: Stack, id: string, code: string, timeoutMs = 60_000) =>
  s.api('POST', '/v1/executions?wait=120', { session_id: id, language: 'python', code, timeout_ms: timeoutMs });

// Each case is a session of its own: they run side by side.
test(
  'saved variables that do not load end the run in its limit; the session goes on',
  { concurrency: 3 },
  async (t) => {
    const s = await startStack({ env: { SANDGATE_API_KEYS: `${KEY}:acme` }, apiKey: KEY });
    t.after(() => s.close());
    const cases: Promise<void>[] = [];

    cases.push(
      t.test('a load that never ends: timeout within the limit, load_timeout, then a fresh interpreter', async () => {
        const id = await stateful(s, HANGS);
        const started = Date.now();
        const created = await s.api('POST', '/v1/executions', {
          session_id: id,
          language: 'python',
          code: 'print(kept)',
          timeout_ms: 4000,
        });
        assert.equal(created.status, 202);
        const { events } = await readSse(`${s.url}/v1/executions/${created.body.id}/events`, {
          headers: { authorization: `Bearer ${KEY}` },
        });
        const elapsed = Date.now() - started;
        const result = JSON.parse(events.at(-1)!.data).result;
        assert.equal(result.state, 'timeout', JSON.stringify(result));
        assert.equal(result.reason, 'timeout');
        assert.match(result.message, /saved variables did not load within the 4000 ms time limit/);
        // The limit, plus making the sandbox and ending it: nowhere near the 60 s a load may otherwise take.
        assert.ok(elapsed < 4000 + 15_000, `ended after ${elapsed} ms`);
        const resumed = JSON.parse(events.find((e) => e.event === 'resumed')!.data);
        assert.equal(resumed.variables.reason, 'load_timeout');
        assert.equal(resumed.variables.restored, 0);
        assert.deepEqual(result.resumed.variables, resumed.variables);
        assert.ok(
          !events.some((e) => e.event === 'phase' && JSON.parse(e.data).phase === 'running'),
          'the code never ran',
        );

        const next = await run(s, id, 'print("alive")\n"kept" in globals()', 10_000);
        assert.equal(next.body.result.state, 'completed', JSON.stringify(next.body.result));
        assert.equal(next.body.result.stdout, 'alive\n');
        assert.equal(next.body.result.value, 'False', 'the variables were dropped');
        assert.equal(next.body.result.interpreter_restarted, true);
        assert.equal(next.body.result.resumed, undefined, 'the session is live again');
      }),
    );

    cases.push(
      t.test(
        'a load that blocks with 20 MB still to come: the wait on the connection ends at the limit too',
        async () => {
          // The interpreter stops reading, the agent's read-ahead fills, and the worker waits on the connection.
          const id = await stateful(s, HANGS + 'big = bytes(20_000_000)\n');
          const started = Date.now();
          const r = await run(s, id, 'print(kept)', 4000);
          assert.equal(r.body.result.state, 'timeout', JSON.stringify(r.body.result));
          assert.equal(r.body.result.resumed.variables.reason, 'load_timeout');
          assert.ok(Date.now() - started < 4000 + 15_000, `ended after ${Date.now() - started} ms`);
          assert.equal((await run(s, id, 'print(2)', 10_000)).body.result.stdout, '2\n');
        },
      ),
    );

    cases.push(
      t.test('a load that raises: the code runs in a fresh interpreter, and the result says why', async () => {
        const id = await stateful(
          s,
          'class Broken:\n' +
            '    def __getstate__(self): return {"x": 1}\n' +
            '    def __setstate__(self, st): raise RuntimeError("no way back")\n' +
            'broken = Broken()\nkept = 5\n',
        );
        const r = await run(s, id, 'print("ran")\n"kept" in globals()', 10_000);
        const result = r.body.result;
        assert.equal(result.state, 'completed', JSON.stringify(result));
        assert.equal(result.stdout, 'ran\n');
        assert.equal(result.value, 'False');
        assert.equal(result.interpreter_restarted, true);
        assert.equal(result.resumed.variables.reason, 'load_failed');
        assert.match(result.resumed.variables.error, /RuntimeError: no way back/);
      }),
    );

    cases.push(
      t.test('a load that ends the interpreter (os._exit): load_failed, the run goes on', async () => {
        const id = await stateful(
          s,
          'class Gone:\n' +
            '    def __getstate__(self): return {"x": 1}\n' +
            '    def __setstate__(self, st): __import__("os")._exit(3)\n' +
            'gone = Gone()\nkept = 5\n',
        );
        const r = await run(s, id, 'print("ran")', 10_000);
        assert.equal(r.body.result.state, 'completed', JSON.stringify(r.body.result));
        assert.equal(r.body.result.resumed.variables.reason, 'load_failed');
      }),
    );

    cases.push(
      t.test('a cancel during the load: cancelled at once; the variables are kept for the next run', async () => {
        const id = await stateful(s, HANGS);
        const created = await s.api('POST', '/v1/executions', {
          session_id: id,
          language: 'python',
          code: 'print(kept)',
          timeout_ms: 60_000,
        });
        // Once its new sandbox is up, the load is next (or under way): the cancel comes to it, not to the queued run.
        const exec = created.body.id as string;
        await until('the session to get its new sandbox', () => s.sessionSandbox(id));
        const cancelledAt = Date.now();
        const cancel = await s.api('POST', `/v1/executions/${exec}/cancel`);
        assert.ok(cancel.status < 300, JSON.stringify(cancel.body));
        const done = await s.api('GET', `/v1/executions/${exec}?wait=30`);
        const result = done.body.result;
        assert.equal(result.state, 'cancelled', JSON.stringify(done.body));
        assert.ok(Date.now() - cancelledAt < 15_000, 'the cancel did not wait for the load');
        assert.equal(result.resumed?.variables.reason, 'cancelled', JSON.stringify(done.body));
        // Kept: the next run loads them again (and, as they never load, ends at its limit saying so).
        const next = await run(s, id, 'print(kept)', 2000);
        assert.equal(next.body.result.resumed.variables.reason, 'load_timeout', JSON.stringify(next.body.result));
      }),
    );

    cases.push(
      t.test(
        'POST …/resume with variables that never load: answers within the load bound with a fresh sandbox',
        async () => {
          const id = await stateful(
            s,
            'class Broken:\n' +
              '    def __getstate__(self): return {"x": 1}\n' +
              '    def __setstate__(self, st): raise ValueError("corrupt")\n' +
              'broken = Broken()\nkept = 5\n',
          );
          const r = await s.api('POST', `/v1/sessions/${id}/resume`);
          assert.equal(r.status, 200, JSON.stringify(r.body));
          assert.equal(r.body.resumed.variables.reason, 'load_failed');
          assert.ok(await s.sessionSandbox(id), 'a sandbox is up');
          const next = await run(s, id, 'print(1)', 10_000);
          assert.equal(next.body.result.stdout, '1\n');
          assert.equal(next.body.result.interpreter_restarted, true);
        },
      ),
    );
    await Promise.all(cases);
  },
);
