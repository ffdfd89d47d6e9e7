import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, until, type Stack } from './harness.ts';

const KEY = 'bounds-test-key-0123456789abc';

async function run(s: Stack, session: string, code: string) {
  const r = await s.api('POST', '/v1/executions?wait=120', { session_id: session, language: 'python', code });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.result;
}

/** An object whose pickling never returns, and does not let an exception stop it either. */
const STUCK =
  'class Stuck:\n' +
  '    def __getstate__(self):\n' +
  '        while True:\n' +
  '            try:\n' +
  '                while True: pass\n' +
  '            except BaseException: pass\n' +
  'stuck = Stuck()\n' +
  'kept = 5\n' +
  "open('kept.txt', 'w').write('files stay')\n";

/** An object whose pickling writes for ever: a list whose items (each a new one, kb of bytes) never end. */
const ENDLESS =
  'import itertools\n' +
  'class Endless:\n' +
  '    def __reduce__(self):\n' +
  '        return (list, (), None, (b"%d" % i * 512 for i in itertools.count()))\n' +
  'endless = Endless()\n' +
  'kept = 6\n';

test('a pause whose save of the variables never ends, or never stops writing, is bounded', async (t) => {
  const s = await startStack({
    env: {
      SANDGATE_API_KEYS: `${KEY}:acme`,
      SANDGATE_STATE_SAVE_TIMEOUT_S: '3',
      SANDGATE_MAX_STATE_BYTES: '8MiB',
    },
    apiKey: KEY,
  });
  t.after(() => s.close());

  await t.test('a __getstate__ that never returns: paused all the same, files kept, save_timeout', async () => {
    const id = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
    assert.equal((await run(s, id, STUCK)).state, 'completed');
    const sandbox = await s.sessionSandbox(id);
    assert.ok(sandbox);
    const paused = await s.api('POST', `/v1/sessions/${id}/pause`);
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    assert.equal(paused.body.session.state, 'paused');
    assert.equal(paused.body.variables.reason, 'save_timeout');
    assert.equal(paused.body.variables.saved, 0);
    assert.match(paused.body.variables.error, /SANDGATE_STATE_SAVE_TIMEOUT_S/);
    assert.equal(await s.sessionSandbox(id), undefined, 'the interpreter and its sandbox are gone');
    const files = (await s.api('GET', `/v1/sessions/${id}/files`)).body.files.map((f: { path: string }) => f.path);
    assert.deepEqual(files, ['kept.txt']);

    const back = await run(s, id, "print(open('kept.txt').read(), 'kept' in globals(), 'stuck' in globals())");
    assert.equal(back.state, 'completed', back.stderr);
    assert.equal(back.stdout, 'files stay False False\n', 'a fresh interpreter, the files as they were');
    assert.ok(back.resumed, 'the run resumed the session');
  });

  await t.test('a fork of such a session holds its files; the stuck interpreter is ended', async () => {
    const id = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
    assert.equal((await run(s, id, STUCK)).state, 'completed');
    const forked = await s.api('POST', `/v1/sessions/${id}/fork`, { count: 1 });
    assert.equal(forked.status, 201, JSON.stringify(forked.body));
    const copy = forked.body.sessions[0].id as string;
    const inCopy = await run(s, copy, "print(open('kept.txt').read(), 'stuck' in globals())");
    assert.equal(inCopy.stdout, 'files stay False\n', inCopy.stderr);
    const source = await run(s, id, "print(open('kept.txt').read())");
    assert.equal(source.stdout, 'files stay\n', source.stderr);
  });

  await t.test(
    'a save that writes without end stops at SANDGATE_MAX_STATE_BYTES: 413, the session as it was',
    async () => {
      const id = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
      assert.equal((await run(s, id, ENDLESS)).state, 'completed');
      const sandbox = await s.sessionSandbox(id);
      const paused = await s.api('POST', `/v1/sessions/${id}/pause`);
      assert.equal(paused.status, 413, JSON.stringify(paused.body));
      assert.equal(paused.body.code, 'state_too_large');
      assert.equal((await s.api('GET', `/v1/sessions/${id}`)).body.state, 'idle');
      assert.equal(await s.sessionSandbox(id), sandbox, 'the same sandbox goes on');
      assert.equal((await run(s, id, 'print(kept)')).stdout, '6\n', 'with its variables');
    },
  );

  await t.test('an idle pause of a session whose save never ends pauses it too', async () => {
    const id = (await s.api('POST', '/v1/sessions', { mode: 'stateful', idle_pause_seconds: 10 })).body.id as string;
    assert.equal((await run(s, id, STUCK)).state, 'completed');
    const paused = await until(
      'the session to pause by itself',
      async () => {
        const r = await s.api('GET', `/v1/sessions/${id}`);
        return r.body.state === 'paused' ? r.body : null;
      },
      60_000,
    );
    assert.ok(paused.paused_at);
    assert.equal(await s.sessionSandbox(id), undefined);
  });
});
