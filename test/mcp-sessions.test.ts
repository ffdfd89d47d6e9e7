import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';
import { mcpClient, toolsOf } from './mcp-client.ts';

const KEY = 'mcp-sessions-key-0123456789abcdef';
const OTHER = 'mcp-sessions-other-0123456789abcd';

const LIFECYCLE_TOOLS = [
  'pause_session',
  'resume_session',
  'fork_session',
  'snapshot_session',
  'list_snapshots',
  'restore_snapshot',
  'delete_snapshot',
  'undo_run',
];

test('MCP sessions that last: pause, resume, fork, snapshots, undo', async (t) => {
  // On the quick start's btrfs data disk: undo keeps its steps as snapshots there, and nowhere else.
  const s = await startStack({
    env: { SANDGATE_API_KEYS: `${KEY}:acme,${OTHER}:globex`, SANDGATE_MAX_SNAPSHOTS: '2' },
    apiKey: KEY,
    diskQuotas: true,
  });
  t.after(() => s.close());
  const { client } = await mcpClient(s, { apiKey: KEY });
  t.after(() => client.close());
  const other = await mcpClient(s, { apiKey: OTHER });
  t.after(() => other.client.close());
  const { ok, fail } = toolsOf(client);
  const stranger = toolsOf(other.client);

  const python = async (session: string, code: string) => {
    const out = await ok('run_python', { session_id: session, code });
    assert.equal(out.exit_code, 0, out.stderr);
    return out;
  };
  const state = async (id: string) => (await s.api('GET', `/v1/sessions/${id}`)).body.state as string;

  await t.test('tools/list: each tool with its input schema, and create_session takes undo', async () => {
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((x) => [x.name, x]));
    for (const name of LIFECYCLE_TOOLS) {
      const tool = byName[name];
      assert.ok(tool, `${name} is listed`);
      assert.equal(tool.inputSchema.type, 'object');
      assert.equal(tool.outputSchema?.type, 'object');
      assert.ok(!JSON.stringify(tool).includes('$ref'), `${name} stands alone`);
    }
    assert.deepEqual(byName.pause_session!.inputSchema.required, ['session_id']);
    assert.deepEqual(byName.fork_session!.inputSchema.required, ['session_id']);
    assert.deepEqual(byName.snapshot_session!.inputSchema.required, ['session_id', 'name']);
    assert.deepEqual(byName.restore_snapshot!.inputSchema.required, ['session_id', 'name']);
    assert.deepEqual(Object.keys(byName.restore_snapshot!.inputSchema.properties!), ['session_id', 'name', 'into_new']);
    const count = byName.fork_session!.inputSchema.properties!.count as { minimum: number; maximum: number };
    assert.deepEqual([count.minimum, count.maximum], [1, 10]);
    const undo = byName.create_session!.inputSchema.properties!.undo as { anyOf: { const: string }[] };
    assert.deepEqual(
      undo.anyOf.map((u) => u.const),
      ['files', 'state', 'off'],
    );
    assert.equal(byName.list_snapshots!.annotations?.readOnlyHint, true);
    assert.equal(byName.restore_snapshot!.annotations?.destructiveHint, true);
  });

  let session = '';
  await t.test('pause_session removes the sandbox and keeps the files; resume_session brings it back', async () => {
    const made = await ok('create_session', { undo: 'files' });
    session = made.session_id;
    assert.equal(made.undo, 'files');
    await python(session, "open('notes.txt', 'w').write('kept')");
    assert.ok(await s.sessionSandbox(session));

    const paused = await ok('pause_session', { session_id: session });
    assert.equal(paused.session_id, session);
    assert.equal(paused.state, 'paused');
    assert.ok(Date.parse(paused.paused_at) <= Date.now());
    assert.equal(paused.variables, null, 'a process session has no variables');
    assert.equal(await state(session), 'paused');
    assert.equal(await s.sessionSandbox(session), undefined, 'no sandbox while paused');
    const listed = await ok('list_artifacts', { session_id: session });
    assert.deepEqual(
      listed.artifacts.map((a: { path: string }) => a.path),
      ['/mnt/data/notes.txt'],
      'its files can be listed while paused',
    );

    const resumed = await ok('resume_session', { session_id: session });
    assert.equal(resumed.state, 'idle');
    assert.equal(resumed.paused_at, null);
    assert.equal(resumed.resumed.paused_at, paused.paused_at);
    assert.ok(resumed.resumed.duration_ms > 0);
    assert.ok(await s.sessionSandbox(session), 'a new sandbox');
    assert.equal((await python(session, "print(open('notes.txt').read())")).stdout, 'kept\n');
    assert.equal((await ok('resume_session', { session_id: session })).resumed, null, 'not paused: nothing to do');
  });

  await t.test("pause_session and resume_session: an unknown session, another tenant's session", async () => {
    const unknown = 'sess_000000000000';
    assert.deepEqual(await fail('pause_session', { session_id: unknown }), {
      error: 'session_not_found',
      message: `No active session with id ${unknown}`,
      session_id: unknown,
    });
    assert.equal((await stranger.fail('pause_session', { session_id: session })).error, 'session_not_found');
    assert.equal((await stranger.fail('resume_session', { session_id: session })).error, 'session_not_found');
    assert.equal(await state(session), 'idle', "the other tenant's calls changed nothing");
  });

  await t.test("a stateful session's variables come back after a pause; what cannot be saved is named", async () => {
    const made = await ok('create_session', { mode: 'stateful' });
    const id = made.session_id;
    await python(id, "x = 41\nfh = open('/tmp/scratch', 'w')");
    const paused = await ok('pause_session', { session_id: id });
    assert.ok(paused.variables.saved >= 1, JSON.stringify(paused.variables));
    assert.deepEqual(paused.variables.unsaved, [{ name: 'fh', reason: 'an open file' }]);
    const resumed = await ok('resume_session', { session_id: id });
    assert.ok(resumed.resumed.variables.restored >= 1, JSON.stringify(resumed.resumed));
    assert.deepEqual(resumed.resumed.variables.unsaved, [{ name: 'fh', reason: 'an open file' }]);
    const after = await ok('run_python', { session_id: id, code: 'x + 1' });
    assert.equal(after.value, '42');
    assert.equal(after.resumed, undefined, 'resume_session brought it back: the run is an ordinary one');
  });

  await t.test('a run on a paused session brings it back and says so, in its result and its progress', async () => {
    const id = (await ok('create_session', { mode: 'stateful' })).session_id;
    await python(id, 'x = 41');
    await ok('pause_session', { session_id: id });
    const progress: string[] = [];
    const out = await ok(
      'run_python',
      { session_id: id, code: 'x + 1' },
      { onprogress: (p) => progress.push(p.message ?? '') },
    );
    assert.equal(out.value, '42');
    assert.ok(out.resumed.duration_ms > 0, JSON.stringify(out.resumed));
    assert.ok(out.resumed.variables.restored >= 1, JSON.stringify(out.resumed));
    assert.ok(
      progress.some((m) => /^resumed: the paused session came back in \d+ ms$/.test(m)),
      progress.join('\n'),
    );
    assert.equal(await state(id), 'idle');
  });

  await t.test('fork_session: copies that hold the files, start paused and go their own way', async () => {
    const forked = await ok('fork_session', { session_id: session, count: 2 });
    assert.equal(forked.session_id, session);
    assert.equal(forked.sessions.length, 2);
    const [a, b] = forked.sessions as { session_id: string; state: string; forked_from: string }[];
    for (const copy of [a!, b!]) {
      assert.match(copy.session_id, /^sess_[0-9a-f]{12}$/);
      assert.notEqual(copy.session_id, session);
      assert.equal(copy.state, 'paused');
      assert.equal(copy.forked_from, session);
    }
    await python(a!.session_id, "open('notes.txt', 'w').write('changed in a')");
    assert.equal((await python(b!.session_id, "print(open('notes.txt').read())")).stdout, 'kept\n');
    assert.equal((await python(session, "print(open('notes.txt').read())")).stdout, 'kept\n');
    assert.equal(await state(session), 'idle', 'the source kept going');

    const tooMany = await fail('fork_session', { session_id: session, count: 11 });
    assert.equal(tooMany.error, 'validation_failed');
    assert.match(tooMany.message, /^count/);
    assert.equal((await stranger.fail('fork_session', { session_id: session })).error, 'session_not_found');
  });

  await t.test("fork_session takes the copies' metadata, as POST /v1/sessions/{id}/fork does", async () => {
    const source = (await s.api('GET', `/v1/sessions/${session}`)).body;
    const labelled = await ok('fork_session', { session_id: session, metadata: { idea: 'b', run: '2' } });
    const copy = labelled.sessions[0] as { session_id: string; metadata: Record<string, string> };
    assert.deepEqual(copy.metadata, { idea: 'b', run: '2' });
    const rest = await s.api('GET', `/v1/sessions/${copy.session_id}`);
    assert.deepEqual(rest.body.metadata, { idea: 'b', run: '2' }, 'the copy keeps them');
    const plain = await ok('fork_session', { session_id: session });
    assert.deepEqual(plain.sessions[0].metadata, source.metadata, "without metadata: the source's");
    const tooLong = await fail('fork_session', { session_id: session, metadata: { idea: 'x'.repeat(257) } });
    assert.equal(tooLong.error, 'validation_failed', tooLong.message);
    for (const c of [copy.session_id, plain.sessions[0].session_id]) {
      assert.equal((await s.api('DELETE', `/v1/sessions/${c}`)).status, 204);
    }
  });

  await t.test(
    'snapshot_session, list_snapshots, restore_snapshot (in place and into_new), delete_snapshot',
    async () => {
      const snap = await ok('snapshot_session', { session_id: session, name: 'before-change' });
      assert.equal(snap.session_id, session);
      assert.equal(snap.name, 'before-change');
      assert.ok(snap.size_bytes >= 4, JSON.stringify(snap));
      assert.equal(snap.variables, false);
      assert.equal(
        (await fail('snapshot_session', { session_id: session, name: 'before-change' })).error,
        'snapshot_exists',
      );
      assert.equal((await fail('snapshot_session', { session_id: session, name: '../up' })).error, 'validation_failed');
      await ok('snapshot_session', { session_id: session, name: 'second' });
      assert.equal((await fail('snapshot_session', { session_id: session, name: 'third' })).error, 'max_snapshots');

      const listed = await ok('list_snapshots', { session_id: session });
      assert.deepEqual(
        listed.snapshots.map((x: { name: string }) => x.name),
        ['before-change', 'second'],
      );
      assert.equal((await stranger.fail('list_snapshots', { session_id: session })).error, 'session_not_found');

      await python(session, "open('notes.txt', 'w').write('after')\nopen('extra.txt', 'w').write('x')");
      const restored = await ok('restore_snapshot', { session_id: session, name: 'before-change' });
      assert.equal(restored.session_id, session);
      assert.equal(restored.from_session_id, session);
      assert.equal(restored.snapshot, 'before-change');
      assert.equal(restored.state, 'paused', 'it comes back at its next run');
      const back = await python(session, "import os\nprint(open('notes.txt').read(), os.path.exists('extra.txt'))");
      assert.equal(back.stdout, 'kept False\n');

      await python(session, "open('notes.txt', 'w').write('moved on')");
      const copy = await ok('restore_snapshot', { session_id: session, name: 'before-change', into_new: true });
      assert.notEqual(copy.session_id, session);
      assert.equal(copy.from_session_id, session);
      assert.equal(copy.state, 'paused');
      assert.equal((await python(copy.session_id, "print(open('notes.txt').read())")).stdout, 'kept\n');
      assert.equal((await python(session, "print(open('notes.txt').read())")).stdout, 'moved on\n', 'left as it was');

      const missing = await fail('restore_snapshot', { session_id: session, name: 'nope' });
      assert.equal(missing.error, 'snapshot_not_found');
      assert.equal(missing.session_id, session);

      assert.deepEqual(await ok('delete_snapshot', { session_id: session, name: 'second' }), {
        session_id: session,
        name: 'second',
        status: 'deleted',
      });
      assert.equal(
        (await fail('delete_snapshot', { session_id: session, name: 'second' })).error,
        'snapshot_not_found',
      );
      assert.deepEqual(
        (await ok('list_snapshots', { session_id: session })).snapshots.map((x: { name: string }) => x.name),
        ['before-change'],
      );
    },
  );

  await t.test('undo_run: the files as they were before the last run, one run further back each time', async () => {
    const id = (await ok('create_session', {})).session_id;
    await python(id, "open('data.txt', 'w').write('v1')");
    await python(id, "open('data.txt', 'w').write('v2')");
    const broken = await python(id, "import os\nos.remove('data.txt')");
    const undone = await ok('undo_run', { session_id: id });
    assert.equal(undone.session_id, id);
    assert.equal(undone.undone_run_id, broken.run_id);
    assert.equal(undone.variables, false);
    assert.equal(undone.state, 'paused');
    assert.ok(undone.remaining >= 1, JSON.stringify(undone));
    assert.equal((await python(id, "print(open('data.txt').read())")).stdout, 'v2\n');
    // The run just made is undone first, then the one that wrote v2.
    await ok('undo_run', { session_id: id });
    const further = await ok('undo_run', { session_id: id });
    assert.equal(further.remaining, undone.remaining - 1);
    assert.equal((await python(id, "print(open('data.txt').read())")).stdout, 'v1\n');

    const off = (await ok('create_session', { undo: 'off' })).session_id;
    await python(off, 'print(1)');
    const nothing = await fail('undo_run', { session_id: off });
    assert.equal(nothing.error, 'nothing_to_undo');
    assert.equal(nothing.session_id, off);
    assert.equal((await stranger.fail('undo_run', { session_id: id })).error, 'session_not_found');
  });
});
