import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, type Stack } from './harness.ts';

const KEY = 'undo-test-key-0123456789abcde';
const OTHER = 'undo-other-key-0123456789abcd';
const as = (key: string) => ({ authorization: `Bearer ${key}` });

async function run(s: Stack, session: string, code: string) {
  const r = await s.api('POST', '/v1/executions?wait=120', { session_id: session, language: 'python', code });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.result.state, 'completed', r.body.result.stderr);
  return r.body;
}

const read = async (s: Stack, id: string, path: string) => {
  const r = await fetch(`${s.url}/files/${id}/${path}`, { headers: as(KEY) });
  return r.status === 200 ? r.text() : null;
};

// Undo steps are btrfs snapshots kept before each run: the quick start's data disk.
test('undo: the files as they were before the last run, one run further back each time', async (t) => {
  const s = await startStack({
    env: { SANDGATE_API_KEYS: `${KEY}:acme,${OTHER}:globex`, SANDGATE_UNDO_DEPTH: '3' },
    apiKey: KEY,
    diskQuotas: true,
  });
  t.after(() => s.close());

  await t.test('repeatable, each undo one run back, to the depth; then nothing_to_undo', async () => {
    const id = (await s.api('POST', '/v1/sessions')).body.id as string;
    const runs: string[] = [];
    for (const v of ['one', 'two', 'three', 'four']) {
      runs.push((await run(s, id, `open('f.txt','w').write('${v}')`)).id);
    }
    assert.equal(await read(s, id, 'f.txt'), 'four');
    const first = await s.api('POST', `/v1/sessions/${id}/undo`);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(first.body.undone_execution_id, runs[3]);
    assert.equal(first.body.remaining, 2);
    assert.equal(first.body.session.state, 'paused');
    assert.equal(await read(s, id, 'f.txt'), 'three');
    assert.equal((await s.api('POST', `/v1/sessions/${id}/undo`)).body.undone_execution_id, runs[2]);
    assert.equal(await read(s, id, 'f.txt'), 'two');
    assert.equal((await s.api('POST', `/v1/sessions/${id}/undo`)).body.remaining, 0);
    assert.equal(await read(s, id, 'f.txt'), 'one');
    const none = await s.api('POST', `/v1/sessions/${id}/undo`);
    assert.equal(none.status, 409, JSON.stringify(none.body));
    assert.equal(none.body.code, 'nothing_to_undo');
    // A bad rm, undone: the next run's undo step is kept as before.
    await run(s, id, "import os\nos.remove('f.txt')");
    assert.equal(await read(s, id, 'f.txt'), null);
    assert.equal((await s.api('POST', `/v1/sessions/${id}/undo`)).status, 200);
    assert.equal(await read(s, id, 'f.txt'), 'one');
  });

  await t.test('undo "files" keeps the variables as they are; undo "state" brings them back too', async () => {
    const files = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
    const state = (await s.api('POST', '/v1/sessions', { mode: 'stateful', undo: 'state' })).body;
    assert.equal(state.undo, 'state');
    for (const id of [files, state.id as string]) {
      await run(s, id, "x = 1\nopen('f.txt','w').write('1')");
      await run(s, id, "x = 2\nopen('f.txt','w').write('2')");
    }
    const a = await s.api('POST', `/v1/sessions/${files}/undo`);
    assert.equal(a.body.variables, false);
    const b = await s.api('POST', `/v1/sessions/${state.id}/undo`);
    assert.equal(b.body.variables, true);
    assert.equal((await run(s, files, "print(x, open('f.txt').read())")).result.stdout, '2 1\n');
    assert.equal((await run(s, state.id, "print(x, open('f.txt').read())")).result.stdout, '1 1\n');
  });

  await t.test('undo "off": nothing_to_undo; another tenant: 404', async () => {
    const off = (await s.api('POST', '/v1/sessions', { undo: 'off' })).body.id as string;
    await run(s, off, "open('f.txt','w').write('x')");
    const r = await s.api('POST', `/v1/sessions/${off}/undo`);
    assert.equal(r.status, 409);
    assert.equal(r.body.code, 'nothing_to_undo');
    const theirs = await s.api('POST', `/v1/sessions/${off}/undo`, undefined, as(OTHER));
    assert.equal(theirs.status, 404);
    assert.equal(theirs.body.code, 'session_not_found');
  });
});
