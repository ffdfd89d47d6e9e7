import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startStack, type Stack } from './harness.ts';

const exec = promisify(execFile);
const KEY = 'fork-test-key-0123456789abcd';
const OTHER = 'fork-other-key-0123456789abc';
const as = (key: string) => ({ authorization: `Bearer ${key}` });

async function run(s: Stack, session: string, code: string) {
  const r = await s.api('POST', '/v1/executions?wait=120', { session_id: session, language: 'python', code });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.result;
}

/** `btrfs subvolume show` of a directory: its UUID and its parent's (the subvolume it is a snapshot of). */
async function subvolume(dir: string): Promise<{ uuid: string; parent: string }> {
  const { stdout } = await exec('btrfs', ['subvolume', 'show', dir]);
  const field = (name: string) => new RegExp(`^\\s*${name}:\\s*(\\S+)`, 'm').exec(stdout)?.[1] ?? '';
  return { uuid: field('UUID'), parent: field('Parent UUID') };
}

/** Bytes only this subvolume holds (its qgroup's exclusive count): what a copy wrote of its own. */
async function exclusiveBytes(dir: string): Promise<number> {
  await exec('btrfs', ['quota', 'rescan', '-w', dir]).catch(() => {});
  const { stdout } = await exec('btrfs', ['qgroup', 'show', '-f', '--raw', dir]);
  const row = stdout.trim().split('\n').at(-1)!.trim().split(/\s+/);
  return Number(row[2]);
}

test('fork: copies of a session that go their own way, on btrfs snapshots', async (t) => {
  const s = await startStack({
    env: { SANDGATE_API_KEYS: `${KEY}:acme,${OTHER}:globex`, SANDGATE_SESSION_DISK_BYTES: '64MiB' },
    apiKey: KEY,
    diskQuotas: true,
  });
  t.after(() => s.close());
  const sessionsDir = join(s.config.dataDir, 'sessions');

  const source = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
  const setup = await run(
    s,
    source,
    'import os\n' +
      "open('big.bin', 'wb').write(os.urandom(8 << 20))\n" +
      "open('note.txt', 'w').write('source')\n" +
      'counter = 41\n',
  );
  assert.equal(setup.state, 'completed', setup.stderr);
  const sandboxBefore = await s.sessionSandbox(source);
  assert.ok(sandboxBefore);

  await t.test('a count outside 1..10 is refused with a clear code', async () => {
    for (const count of [0, 11, 2.5, 'two']) {
      const r = await s.api('POST', `/v1/sessions/${source}/fork`, { count });
      assert.equal(r.status, 400, `count ${count}`);
      assert.equal(r.body.code, 'validation_failed', JSON.stringify(r.body));
      assert.match(r.headers.get('content-type') ?? '', /application\/problem\+json/);
    }
  });

  let copies: string[] = [];
  await t.test('fork of 3: paused copies holding the files and variables; the source keeps running', async () => {
    const r = await s.api('POST', `/v1/sessions/${source}/fork`, { count: 3, metadata: { idea: 'three' } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.equal(r.body.sessions.length, 3);
    copies = r.body.sessions.map((c: { id: string }) => c.id);
    assert.equal(new Set(copies).size, 3);
    for (const c of r.body.sessions) {
      assert.equal(c.state, 'paused');
      assert.equal(c.forked_from, source);
      assert.equal(c.mode, 'stateful');
      assert.deepEqual(c.metadata, { idea: 'three' });
    }
    assert.equal(await s.sessionSandbox(source), sandboxBefore, 'the same sandbox runs on');
    assert.equal((await run(s, source, 'counter')).value, '41', 'the source keeps its live interpreter');
  });

  await t.test('on btrfs each copy is a snapshot of the source: nothing copied', async () => {
    const from = await subvolume(join(sessionsDir, source));
    for (const c of copies) {
      const copy = await subvolume(join(sessionsDir, c));
      assert.equal(copy.parent, from.uuid, `${c} is a snapshot of ${source}`);
      // 8 MiB of files in the source; the copy's own bytes are the few metadata blocks a snapshot takes.
      assert.ok((await exclusiveBytes(join(sessionsDir, c))) < 1 << 20, 'no data was copied');
    }
  });

  await t.test('the copies diverge from the source and from each other', async () => {
    const [a, b] = copies as [string, string];
    const ra = await run(
      s,
      a,
      "counter += 1\nopen('note.txt', 'w').write('a')\nprint(counter, len(open('big.bin','rb').read()))",
    );
    assert.equal(ra.state, 'completed', ra.stderr);
    assert.equal(ra.stdout, `42 ${8 << 20}\n`);
    assert.equal(ra.resumed.variables.restored >= 2, true, JSON.stringify(ra.resumed));
    const rb = await run(s, b, "counter -= 1\nprint(counter, open('note.txt').read())");
    assert.equal(rb.stdout, '40 source\n');
    assert.equal((await run(s, source, "print(counter, open('note.txt').read())")).stdout, '41 source\n');
    const note = await fetch(`${s.url}/files/${a}/note.txt`, { headers: as(KEY) });
    assert.equal(await note.text(), 'a');
  });

  await t.test('each copy has its own disk quota', async () => {
    const [, , c] = copies as [string, string, string];
    // 64 MiB per session: the copy fills its own; the source, sharing the 8 MiB, is untouched by it.
    const full = await run(s, c, "open('fill.bin','wb').write(b'x' * (70 << 20))");
    assert.equal(full.state, 'failed', JSON.stringify(full));
    assert.equal(full.reason, 'disk_quota', JSON.stringify(full));
    const ok = await run(s, source, "open('more.bin','wb').write(b'y' * (40 << 20))\nprint('ok')");
    assert.equal(ok.stdout, 'ok\n', ok.stderr);
  });

  await t.test('another tenant gets 404 for the source, and its fork makes nothing', async () => {
    const r = await s.api('POST', `/v1/sessions/${source}/fork`, { count: 1 }, as(OTHER));
    assert.equal(r.status, 404);
    assert.equal(r.body.code, 'session_not_found');
    assert.equal((await s.api('GET', `/v1/sessions/${copies[0]}`, undefined, as(OTHER))).status, 404);
    assert.equal((await s.api('GET', '/v1/sessions', undefined, as(OTHER))).body.sessions.length, 0);
  });

  await t.test('an unknown session: 404 session_not_found', async () => {
    const r = await s.api('POST', '/v1/sessions/sess_000000000000/fork', {});
    assert.equal(r.status, 404);
    assert.equal(r.body.code, 'session_not_found');
  });
});
