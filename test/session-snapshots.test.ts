import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, type Stack } from './harness.ts';

const KEY = 'snap-test-key-0123456789abcde';
const OTHER = 'snap-other-key-0123456789abcd';
const as = (key: string) => ({ authorization: `Bearer ${key}` });

async function run(s: Stack, session: string, code: string) {
  const r = await s.api('POST', '/v1/executions?wait=120', { session_id: session, language: 'python', code });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.result;
}

test('snapshots: kept, listed, restored (in place or into a new session), deleted, bounded', async (t) => {
  const s = await startStack({
    env: { SANDGATE_API_KEYS: `${KEY}:acme,${OTHER}:globex`, SANDGATE_MAX_SNAPSHOTS: '2' },
    apiKey: KEY,
    diskQuotas: true,
  });
  t.after(() => s.close());
  const id = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
  const base = `/v1/sessions/${id}/snapshots`;
  assert.equal((await run(s, id, "open('data.txt','w').write('v1' * 50_000)\nstage = 1")).state, 'completed');

  await t.test('create: 201 {name, size_bytes, created_at}; the name is taken once', async () => {
    const before = await s.deps.ledger.total('acme');
    const r = await s.api('POST', base, { name: 'first' });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.equal(r.body.name, 'first');
    assert.ok(r.body.size_bytes >= 100_000, JSON.stringify(r.body));
    assert.ok(!Number.isNaN(Date.parse(r.body.created_at)));
    assert.equal(r.body.variables, true, 'a stateful session: its variables are in it');
    assert.ok((await s.deps.ledger.total('acme')) >= before + r.body.size_bytes, 'it counts against the storage quota');
    const again = await s.api('POST', base, { name: 'first' });
    assert.equal(again.status, 409);
    assert.equal(again.body.code, 'snapshot_exists');
    for (const name of ['', '../x', 'a/b', 'x'.repeat(200)]) {
      assert.equal((await s.api('POST', base, { name })).status, 400, `name ${JSON.stringify(name)}`);
    }
  });

  await t.test('restore rolls the files and the variables back', async () => {
    assert.equal(
      (await run(s, id, "open('data.txt','w').write('v2')\nopen('new.txt','w').write('x')\nstage = 2")).state,
      'completed',
    );
    const r = await s.api('POST', `${base}/first/restore`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.session.id, id);
    assert.equal(r.body.session.state, 'paused');
    const back = await run(s, id, "import os\nprint(open('data.txt').read()[:4], os.path.exists('new.txt'), stage)");
    assert.equal(back.stdout, 'v1v1 False 1\n', back.stderr);
  });

  await t.test('restore ?into=new: a new session from the snapshot; the source is left as it is', async () => {
    assert.equal((await run(s, id, 'stage = 3')).state, 'completed');
    const r = await s.api('POST', `${base}/first/restore?into=new`);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    const made = r.body.session;
    assert.notEqual(made.id, id);
    assert.equal(made.forked_from, id);
    assert.equal(made.state, 'paused');
    assert.equal((await run(s, made.id, 'print(stage)')).stdout, '1\n');
    assert.equal((await run(s, id, 'print(stage)')).stdout, '3\n');
  });

  await t.test('list, SANDGATE_MAX_SNAPSHOTS, delete, snapshot_not_found', async () => {
    assert.equal((await s.api('POST', base, { name: 'second' })).status, 201);
    const third = await s.api('POST', base, { name: 'third' });
    assert.equal(third.status, 409, JSON.stringify(third.body));
    assert.equal(third.body.code, 'max_snapshots');
    const list = await s.api('GET', base);
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.snapshots.map((x: { name: string }) => x.name),
      ['first', 'second'],
    );
    const used = await s.deps.ledger.total('acme');
    assert.equal((await s.api('DELETE', `${base}/first`)).status, 204);
    assert.ok((await s.deps.ledger.total('acme')) < used, 'its bytes no longer count');
    assert.deepEqual(
      (await s.api('GET', base)).body.snapshots.map((x: { name: string }) => x.name),
      ['second'],
    );
    for (const [method, path] of [
      ['DELETE', `${base}/first`],
      ['POST', `${base}/first/restore`],
      ['POST', `${base}/first/restore?into=new`],
    ] as const) {
      const r = await s.api(method, path);
      assert.equal(r.status, 404, `${method} ${path}`);
      assert.equal(r.body.code, 'snapshot_not_found');
    }
  });

  await t.test('restore while a run goes: 409 session_busy, and the run is not disturbed', async () => {
    const created = await s.api('POST', '/v1/executions', {
      session_id: id,
      language: 'python',
      code: "import time\ntime.sleep(3)\nprint('done')",
    });
    assert.equal(created.status, 202);
    for (;;) {
      const e = await s.api('GET', `/v1/executions/${created.body.id}`);
      if (e.body.state === 'running') break;
      assert.equal(e.body.state, 'queued');
      await new Promise((r) => setTimeout(r, 50));
    }
    const r = await s.api('POST', `${base}/second/restore`);
    assert.equal(r.status, 409, JSON.stringify(r.body));
    assert.equal(r.body.code, 'session_busy');
    const snap = await s.api('POST', base, { name: 'during' });
    assert.equal(snap.body.code, 'session_busy');
    const done = await s.api('GET', `/v1/executions/${created.body.id}?wait=30`);
    assert.equal(done.body.result.stdout, 'done\n');
  });

  await t.test('snapshots count against the storage quota: at the quota, none is made', async () => {
    const small = await startStack({
      env: { SANDGATE_API_KEYS: `${KEY}:acme`, SANDGATE_TENANT_STORAGE_BYTES: '300KB' },
      apiKey: KEY,
      diskQuotas: true,
    });
    t.after(() => small.close());
    const sid = (await small.api('POST', '/v1/sessions')).body.id as string;
    assert.equal((await run(small, sid, "open('a.bin','wb').write(b'a' * 200_000)")).state, 'completed');
    // Snapshots are made until the quota refuses one: at the latest once the snapshots' own bytes reach it (the
    // files' bytes may be counted a moment late, as btrfs accounts them at its next commit).
    let kept = 0;
    for (let i = 0; ; i++) {
      const r = await small.api('POST', `/v1/sessions/${sid}/snapshots`, { name: `n${i}` });
      if (r.status === 413) {
        assert.equal(r.body.code, 'storage_quota_exceeded');
        break;
      }
      assert.equal(r.status, 201, JSON.stringify(r.body));
      assert.ok(kept < 300_000, `a snapshot was made with ${kept} bytes of snapshots over a 300 KB quota`);
      kept += r.body.size_bytes as number;
    }
    assert.ok(kept > 0, 'one snapshot at least fitted');
  });

  await t.test('another tenant gets 404 on every snapshot route', async () => {
    const routes = [
      ['POST', base, { name: 'theirs' }],
      ['GET', base, undefined],
      ['POST', `${base}/second/restore`, undefined],
      ['POST', `${base}/second/restore?into=new`, undefined],
      ['DELETE', `${base}/second`, undefined],
    ] as const;
    for (const [method, path, body] of routes) {
      const r = await s.api(method, path, body, as(OTHER));
      assert.equal(r.status, 404, `${method} ${path}`);
      assert.equal(r.body.code, 'session_not_found');
    }
    assert.equal((await s.api('GET', base)).body.snapshots.length, 1, 'nothing changed');
  });
});
