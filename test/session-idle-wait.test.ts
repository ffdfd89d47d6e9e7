import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, until, type Stack } from './harness.ts';

const KEY = 'idle-wait-key-0123456789abcde';

/** A variable whose save takes a few seconds: the idle pause holds the session that long. */
const SLOW =
  'import time\n' +
  'class Slow:\n' +
  '    def __getstate__(self):\n' +
  '        time.sleep(4)\n' +
  '        return {"n": 7}\n' +
  'slow = Slow()\n' +
  'value = 41\n';

/** Waits until housekeeping has begun to pause the session: busy, with no run holding it. */
async function pausing(s: Stack, id: string): Promise<void> {
  await until(
    'the idle pause to begin',
    async () => {
      const r = await s.api('GET', `/v1/sessions/${id}`);
      return r.body.state === 'busy' && r.body.current_execution_id === null;
    },
    30_000,
    20,
  );
}

test('a run or a resume sent while a session pauses by itself waits for the pause, then resumes it', async (t) => {
  const s = await startStack({
    env: { SANDGATE_API_KEYS: `${KEY}:acme`, SANDGATE_SESSION_IDLE_PAUSE_S: '2' },
    apiKey: KEY,
  });
  t.after(() => s.close());
  const open = async () => {
    const id = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
    const r = await s.api('POST', '/v1/executions?wait=60', { session_id: id, language: 'python', code: SLOW });
    assert.equal(r.body.result?.state, 'completed', JSON.stringify(r.body));
    return id;
  };

  await t.test('a run: queued behind the idle pause, it resumes the session with its variables', async () => {
    const id = await open();
    await pausing(s, id);
    const r = await s.api('POST', '/v1/executions?wait=60', {
      session_id: id,
      language: 'python',
      code: 'print(value, slow.n)',
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.result.state, 'completed', r.body.result.stderr);
    assert.equal(r.body.result.stdout, '41 7\n', 'nothing was lost');
    assert.ok(r.body.result.resumed, 'the run resumed the session the idle pause left');
    assert.equal(r.body.result.resumed.variables.restored >= 2, true, JSON.stringify(r.body.result.resumed));
  });

  await t.test('an explicit resume: answered once the idle pause is over, with the session live', async () => {
    const id = await open();
    await pausing(s, id);
    const r = await s.api('POST', `/v1/sessions/${id}/resume`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.ok(r.body.resumed, 'it resumed what the idle pause had paused');
    assert.notEqual(r.body.session.state, 'paused');
    assert.ok(await s.sessionSandbox(id), 'a sandbox again');
  });

  await t.test('a run meeting another run still answers 409 session_busy', async () => {
    const id = (await s.api('POST', '/v1/sessions', { mode: 'stateful', idle_pause_seconds: 3600 })).body.id;
    const slow = await s.api('POST', '/v1/executions', {
      session_id: id,
      language: 'python',
      code: 'import time\ntime.sleep(5)',
    });
    assert.equal(slow.status, 202, JSON.stringify(slow.body));
    await until('the run to start', async () => (await s.api('GET', `/v1/sessions/${id}`)).body.state === 'busy');
    const busy = await s.api('POST', '/v1/executions', { session_id: id, language: 'python', code: 'print(1)' });
    assert.equal(busy.status, 409, JSON.stringify(busy.body));
    assert.equal(busy.body.code, 'session_busy');
  });
});
