import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adoptWorkspace, parseUser, SlotDirs } from './pool-dirs.ts';

async function tempRoot(t: TestContext): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'sandgate-pool-dirs-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  return root;
}

test('users parse as uid[:gid]', () => {
  assert.deepEqual(parseUser('1000:1001'), { uid: 1000, gid: 1001 });
  assert.deepEqual(parseUser('1000'), { uid: 1000, gid: 1000 });
  assert.throws(() => parseUser('sandbox'));
});

test('a slot directory is empty, owned by the sandbox user, under a root others cannot list', async (t) => {
  const root = await tempRoot(t);
  const slots = new SlotDirs(root, { uid: 1000, gid: 1000 });
  const { slot, dir } = await slots.create();
  assert.equal(dir, join(root, 'pool', slot));
  const info = await stat(dir);
  assert.equal(info.uid, 1000);
  assert.equal(info.mode & 0o777, 0o755);
  assert.equal((await stat(slots.root)).mode & 0o777, 0o711);
  assert.deepEqual(await readdir(dir), []);
  assert.equal(slots.owns(dir), true);
  assert.equal(slots.owns(join(root, 'sessions', 'x')), false);
  assert.equal(slots.owns(join(dir, 'nested')), false);
  assert.equal(slots.owns(slots.root), false);
  await slots.remove(dir);
  await slots.remove(dir); // gone already: fine
  await assert.rejects(stat(dir), { code: 'ENOENT' });
});

test("adopting moves the session's entries into the slot, which then takes the session's path", async (t) => {
  const root = await tempRoot(t);
  const session = join(root, 'sessions', 'sess_000000000001');
  const slot = join(root, 'pool', 'slot');
  await mkdir(join(session, 'sub'), { recursive: true });
  await mkdir(slot, { recursive: true });
  await writeFile(join(session, 'a.csv'), 'a');
  await writeFile(join(session, 'sub', 'b.txt'), 'b');
  await symlink('/etc/passwd', join(session, 'link'));
  const slotIno = (await stat(slot)).ino;
  await adoptWorkspace(session, slot);
  assert.equal((await stat(session)).ino, slotIno, 'the session path is the slot directory now');
  await assert.rejects(stat(slot), { code: 'ENOENT' });
  assert.deepEqual((await readdir(session)).sort(), ['a.csv', 'link', 'sub']);
  assert.equal(await readFile(join(session, 'sub', 'b.txt'), 'utf8'), 'b');
  assert.equal((await lstat(join(session, 'link'))).isSymbolicLink(), true, 'moved, not followed');
  assert.equal(await readlink(join(session, 'link')), '/etc/passwd');
});

test('a failed adoption puts every entry back', async (t) => {
  const root = await tempRoot(t);
  const session = join(root, 'session');
  const slot = join(root, 'slot');
  await mkdir(join(session, 'sub'), { recursive: true });
  for (const name of ['a', 'b', 'c', 'd']) await writeFile(join(session, name), name);
  // A non-empty directory of the same name in the slot: moving `sub` there fails, whenever readdir lists it.
  await mkdir(join(slot, 'sub'), { recursive: true });
  await writeFile(join(slot, 'sub', 'x'), 'x');
  await assert.rejects(adoptWorkspace(session, slot), (err: NodeJS.ErrnoException) =>
    ['ENOTEMPTY', 'EEXIST'].includes(err.code ?? ''),
  );
  assert.deepEqual((await readdir(session)).sort(), ['a', 'b', 'c', 'd', 'sub']);
  assert.deepEqual(await readdir(slot), ['sub']);
  await assert.rejects(adoptWorkspace(session, join(root, 'missing')), { code: 'ENOENT' });
  assert.deepEqual((await readdir(session)).sort(), ['a', 'b', 'c', 'd', 'sub']);
});
