import { test } from 'node:test';
import assert from 'node:assert/strict';
import { link, mkdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SECRET, code, fixture } from './hostile-fixture.ts';
import { Workspaces } from './workspaces.ts';

const ID = 'sess_0123456789ab';

test('dir() accepts only sess_<12 hex> ids', async (t) => {
  const { base } = await fixture(t);
  const ws = new Workspaces({ dataDir: base });
  assert.equal(ws.dir(ID), join(base, 'sessions', ID));
  for (const bad of [
    '',
    'sess_',
    'sess_0123456789AB',
    'sess_0123456789abc',
    'sess_0123456789a',
    '../sess_0123456789ab',
    'sess_0123456789ab/..',
    'sess_0123456789ab\n',
    'exec_0123456789ab',
  ]) {
    assert.throws(() => ws.dir(bad), code('invalid_path'), JSON.stringify(bad));
  }
  await assert.rejects(ws.create('../../etc'), code('invalid_path'));
  await assert.rejects(ws.remove('..'), code('invalid_path'));
});

test('create() makes dataDir, sessions/ and the session dir with the right modes and owner, idempotently', async (t) => {
  const { base } = await fixture(t);
  const dataDir = join(base, 'data');
  const ws = new Workspaces({ dataDir, owner: { uid: 1000, gid: 1000 } });
  const dir = await ws.create(ID);
  assert.equal(dir, join(dataDir, 'sessions', ID));
  assert.equal((await stat(dataDir)).mode & 0o777, 0o711);
  assert.equal((await stat(join(dataDir, 'sessions'))).mode & 0o777, 0o711);
  const st = await stat(dir);
  assert.deepEqual([st.mode & 0o777, st.uid, st.gid], [0o755, 1000, 1000]);
  await writeFile(join(dir, 'keep.txt'), 'x');
  assert.equal(await ws.create(ID), dir);
  assert.equal(await readFile(join(dir, 'keep.txt'), 'utf8'), 'x');
});

test('create() refuses a session path that is not a real directory', async (t) => {
  const { base, outside } = await fixture(t);
  const ws = new Workspaces({ dataDir: base, owner: { uid: 1000, gid: 1000 } });
  await mkdir(join(base, 'sessions'));
  await symlink(outside, ws.dir(ID));
  await assert.rejects(ws.create(ID), code('invalid_path'));
  assert.equal((await stat(outside)).uid, 0, 'the symlink target was not chowned');
});

test('remove() deletes everything without following links, and tolerates a missing session', async (t) => {
  const { base, outside } = await fixture(t);
  const ws = new Workspaces({ dataDir: base });
  const dir = await ws.create(ID);
  await mkdir(join(dir, 'out'));
  await writeFile(join(dir, 'out/a.csv'), 'a');
  await symlink(outside, join(dir, 'out/escape'));
  await symlink('/etc/passwd', join(dir, 'passwd'));
  await link(join(outside, 'secret.txt'), join(dir, 'hard'));
  await ws.remove(ID);
  await assert.rejects(stat(dir), { code: 'ENOENT' });
  assert.equal(await readFile(join(outside, 'secret.txt'), 'utf8'), SECRET);
  assert.ok((await stat('/etc/passwd')).isFile());
  await ws.remove(ID);
  await new Workspaces({ dataDir: join(base, 'never-created') }).remove(ID);
});

test('dataDir is the root the options named', () => {
  assert.equal(new Workspaces({ dataDir: '/srv/sandgate' }).dataDir, '/srv/sandgate');
});
