import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Sandgate, SandgateApiError } from '@sandgate/client';
import { startStack } from './harness.ts';

const KEY = 'client-sessions-key-0123456789abc';
const OTHER = 'client-sessions-other-0123456789a';

test('@sandgate/client: pause, resume, fork, snapshots and undo over the real HTTP API', async (t) => {
  // On the quick start's btrfs data disk, where undo keeps its steps.
  const s = await startStack({
    env: { SANDGATE_API_KEYS: `${KEY}:acme,${OTHER}:globex` },
    apiKey: KEY,
    diskQuotas: true,
  });
  t.after(() => s.close());
  const sandgate = new Sandgate({ baseUrl: s.url, apiKey: KEY });
  const stranger = new Sandgate({ baseUrl: s.url, apiKey: OTHER });
  const py = async (sessionId: string, code: string) => {
    const run = await sandgate.run({ session_id: sessionId, language: 'python', code }, { timeoutSeconds: 120 });
    assert.equal(run.result?.state, 'completed', run.result?.stderr);
    return run;
  };
  const failure = async (p: Promise<unknown>) => {
    const err = await p.then(
      () => assert.fail('it should have failed'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof SandgateApiError, String(err));
    return err;
  };
  const session = (await sandgate.createSession({ mode: 'stateful' })).id;

  await t.test('pause() and resume(): the variables and files come back; another tenant gets 404', async () => {
    await py(session, "x = 41\nopen('notes.txt', 'w').write('kept')");
    const paused = await sandgate.pause(session);
    assert.equal(paused.session.state, 'paused');
    assert.ok(paused.variables && paused.variables.saved >= 1, JSON.stringify(paused.variables));
    assert.deepEqual(
      (await sandgate.files(session)).map((f) => f.path),
      ['notes.txt'],
    );
    const resumed = await sandgate.resume(session);
    assert.equal(resumed.session.state, 'idle');
    assert.ok(resumed.resumed && resumed.resumed.duration_ms > 0);
    assert.equal((await sandgate.resume(session)).resumed, null);
    assert.equal((await py(session, 'x + 1')).result?.value, '42');

    const err = await failure(stranger.pause(session));
    assert.equal(err.status, 404);
    assert.equal(err.code, 'session_not_found');
  });

  await t.test('fork(): paused copies with the files and variables, labelled as asked', async () => {
    const copies = await sandgate.fork(session, { count: 2, metadata: { idea: 'b' } });
    assert.equal(copies.length, 2);
    for (const c of copies) {
      assert.equal(c.state, 'paused');
      assert.equal(c.forked_from, session);
      assert.deepEqual(c.metadata, { idea: 'b' });
    }
    await py(copies[0]!.id, 'x = 0');
    assert.equal((await py(copies[1]!.id, 'x')).result?.value, '41');
    assert.equal((await py(session, 'x')).result?.value, '41');
    const err = await failure(sandgate.fork(session, { count: 11 }));
    assert.equal(err.status, 400);
    assert.equal(err.code, 'validation_failed');
  });

  await t.test(
    'snapshot(), snapshots(), restoreSnapshot() in place and into a new session, deleteSnapshot()',
    async () => {
      const snap = await sandgate.snapshot(session, 'base');
      assert.equal(snap.name, 'base');
      assert.equal(snap.variables, true);
      assert.ok(snap.size_bytes > 0);
      await py(session, "x = 7\nopen('notes.txt', 'w').write('changed')");
      const rolledBack = await sandgate.restoreSnapshot(session, 'base');
      assert.equal(rolledBack.id, session);
      assert.equal(rolledBack.state, 'paused');
      assert.equal((await py(session, "(x, open('notes.txt').read())")).result?.value, "(41, 'kept')");

      const made = await sandgate.restoreSnapshot(session, 'base', { intoNew: true });
      assert.notEqual(made.id, session);
      assert.equal(made.forked_from, session);
      assert.equal((await py(made.id, 'x')).result?.value, '41');

      assert.deepEqual(
        (await sandgate.snapshots(session)).map((x) => x.name),
        ['base'],
      );
      await sandgate.deleteSnapshot(session, 'base');
      assert.deepEqual(await sandgate.snapshots(session), []);
      const err = await failure(sandgate.restoreSnapshot(session, 'base'));
      assert.equal(err.status, 404);
      assert.equal(err.code, 'snapshot_not_found');
    },
  );

  await t.test('undo(): the files as they were before the last run', async () => {
    const id = (await sandgate.createSession()).id;
    await py(id, "open('data.txt', 'w').write('v1')");
    const bad = await py(id, "import os\nos.remove('data.txt')");
    const undone = await sandgate.undo(id);
    assert.equal(undone.undone_execution_id, bad.id);
    assert.equal(undone.session.state, 'paused');
    assert.equal(undone.variables, false);
    assert.deepEqual(
      (await sandgate.files(id)).map((f) => f.path),
      ['data.txt'],
    );
    const off = (await sandgate.createSession({ undo: 'off' })).id;
    const err = await failure(sandgate.undo(off));
    assert.equal(err.code, 'nothing_to_undo');
  });
});
