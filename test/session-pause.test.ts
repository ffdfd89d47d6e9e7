import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, type Stack } from './harness.ts';
import { readSse } from './sse-client.ts';

const OTHER = 'other-tenant-key-0123456789';
const KEY = 'pause-test-key-0123456789abc';
const keys = `${KEY}:acme,${OTHER}:globex`;
const as = (key: string) => ({ authorization: `Bearer ${key}` });

async function run(s: Stack, session: string, code: string) {
  const r = await s.api('POST', '/v1/executions?wait=120', { session_id: session, language: 'python', code });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

test('pause removes the sandbox and keeps the files; a run or resume brings it back', async (t) => {
  const s = await startStack({ env: { SANDGATE_API_KEYS: keys }, apiKey: KEY });
  t.after(() => s.close());
  const open = async (body: object = {}) => {
    const r = await s.api('POST', '/v1/sessions', body);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.id as string;
  };

  await t.test('a process session: pause, files while paused, a run resumes it and says so', async () => {
    const id = await open();
    assert.equal((await run(s, id, "open('kept.txt', 'w').write('before')")).result.state, 'completed');
    assert.ok(await s.sessionSandbox(id), 'the session has a sandbox');
    const paused = await s.api('POST', `/v1/sessions/${id}/pause`);
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    assert.equal(paused.body.session.state, 'paused');
    assert.equal(paused.body.variables, null);
    assert.equal(paused.body.session.pauses_at, null);
    assert.ok(paused.body.session.paused_at);
    assert.equal(await s.sessionSandbox(id), undefined, 'no container or Pod is left');

    const listed = await s.api('GET', `/v1/sessions/${id}/files`);
    assert.deepEqual(
      listed.body.files.map((f: { path: string }) => f.path),
      ['kept.txt'],
    );
    const put = await s.api('PUT', `/v1/sessions/${id}/files/added.txt`, 'while paused', {
      'content-type': 'text/plain',
    });
    assert.equal(put.status, 201);
    const got = await fetch(`${s.url}/files/${id}/kept.txt`, { headers: as(KEY) });
    assert.equal(await got.text(), 'before');
    assert.equal((await s.api('GET', `/v1/sessions/${id}`)).body.state, 'paused', 'file use does not resume it');

    const created = await s.api('POST', '/v1/executions', {
      session_id: id,
      language: 'python',
      code: "print(open('kept.txt').read(), open('added.txt').read())",
    });
    const { events } = await readSse(`${s.url}/v1/executions/${created.body.id}/events`, { headers: as(KEY) });
    const resumedEvent = events.find((e) => e.event === 'resumed');
    assert.ok(resumedEvent, `a resumed event: ${events.map((e) => e.event).join(',')}`);
    const resumed = JSON.parse(resumedEvent.data);
    assert.equal(resumed.variables, null);
    assert.ok(resumed.duration_ms >= 0);
    const result = JSON.parse(events.at(-1)!.data).result;
    assert.equal(result.stdout, 'before while paused\n');
    assert.equal(result.resumed.paused_at, paused.body.session.paused_at);
    const after = await s.api('GET', `/v1/sessions/${id}`);
    assert.equal(after.body.state, 'idle');
    assert.ok(after.body.pauses_at);
    assert.ok(await s.sessionSandbox(id));
  });

  await t.test('resume without a run; pausing twice or resuming a live session changes nothing', async () => {
    const id = await open();
    assert.equal((await s.api('POST', `/v1/sessions/${id}/resume`)).body.resumed, null, 'a live session');
    await s.api('POST', `/v1/sessions/${id}/pause`);
    const again = await s.api('POST', `/v1/sessions/${id}/pause`);
    assert.equal(again.status, 200);
    assert.equal(again.body.session.state, 'paused');
    const resumed = await s.api('POST', `/v1/sessions/${id}/resume`);
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.session.state, 'idle');
    assert.ok(resumed.body.resumed.duration_ms > 0);
    assert.ok(await s.sessionSandbox(id), 'a new sandbox was made');
    const r = await run(s, id, 'print(1)');
    assert.equal(r.result.resumed, undefined, 'the run after a resume is an ordinary one');
  });

  await t.test("a stateful session's variables survive; what cannot be saved is named", async () => {
    const id = await open({ mode: 'stateful' });
    const setup = await run(
      s,
      id,
      'import pandas as pd, socket\n' +
        "df = pd.DataFrame({'a': range(1000)})\n" +
        'def twice(v): return 2 * v\n' +
        'class Box:\n    def __init__(self, v): self.v = v\n' +
        'box = Box(21)\n' +
        'conn = socket.socket()\n' +
        "fh = open('/tmp/scratch', 'w')\n",
    );
    assert.equal(setup.result.state, 'completed', setup.result.stderr);
    const paused = await s.api('POST', `/v1/sessions/${id}/pause`);
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    const unsaved = Object.fromEntries(
      paused.body.variables.unsaved.map((u: { name: string; reason: string }) => [u.name, u.reason]),
    );
    assert.deepEqual(unsaved, { conn: 'a socket', fh: 'an open file' });
    assert.ok(paused.body.variables.saved >= 4, JSON.stringify(paused.body.variables));
    assert.ok(paused.body.variables.size_bytes > 1000);
    assert.equal(await s.sessionSandbox(id), undefined);

    const back = await run(s, id, 'print(twice(box.v), int(df.a.sum()), pd.__name__)\n"conn" in globals()');
    assert.equal(back.result.state, 'completed', back.result.stderr);
    assert.equal(back.result.stdout, '42 499500 pandas\n');
    assert.equal(back.result.value, 'False');
    assert.equal(back.result.interpreter_restarted, false, 'the variables came back: no restart');
    assert.ok(back.result.resumed.variables.restored >= 4);
    assert.deepEqual(
      back.result.resumed.variables.unsaved.map((u: { name: string }) => u.name),
      ['conn', 'fh'],
    );
  });

  await t.test('variables larger than SANDGATE_MAX_STATE_BYTES: state_too_large, or dropped when asked', async () => {
    const small = await startStack({
      env: { SANDGATE_API_KEYS: keys, SANDGATE_MAX_STATE_BYTES: '64KiB' },
      apiKey: KEY,
    });
    t.after(() => small.close());
    const id = (await small.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
    await run(small, id, "big = b'x' * 200_000\nsmall = 1");
    const refused = await small.api('POST', `/v1/sessions/${id}/pause`);
    assert.equal(refused.status, 413);
    assert.equal(refused.body.code, 'state_too_large');
    assert.equal((await small.api('GET', `/v1/sessions/${id}`)).body.state, 'idle', 'nothing changed');
    assert.equal((await run(small, id, 'small')).result.value, '1', 'the interpreter lives on');
    const dropped = await small.api('POST', `/v1/sessions/${id}/pause`, { discard_variables: true });
    assert.equal(dropped.status, 200);
    assert.equal(dropped.body.variables, null);
    const after = await run(small, id, 'small');
    assert.match(after.result.stderr, /NameError/);
  });

  await t.test('another tenant sees none of it: 404 on every route', async () => {
    const id = await open();
    for (const path of ['pause', 'resume']) {
      const r = await s.api('POST', `/v1/sessions/${id}/${path}`, undefined, as(OTHER));
      assert.equal(r.status, 404, path);
      assert.equal(r.body.code, 'session_not_found');
    }
  });
});
