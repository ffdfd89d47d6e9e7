import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fixture, mkfifo } from './hostile-fixture.ts';
import { at, atRaw, errno, openDirPath } from './fd-path.ts';

test('openDirPath walks real directories and names children through the held fd', async (t) => {
  const { root } = await fixture(t);
  await mkdir(join(root, 'a/b'), { recursive: true });
  await writeFile(join(root, 'a/b/f'), 'x');
  const dir = await openDirPath(root, ['a', 'b']);
  try {
    assert.equal(at(dir), `/proc/self/fd/${dir.fd}`);
    assert.deepEqual(await readdir(at(dir)), ['f']);
    assert.deepEqual(atRaw(dir, Buffer.from([0xff])).subarray(-2), Buffer.from([0x2f, 0xff]));
  } finally {
    await dir.close();
  }
});

test('openDirPath refuses symlinks, files and FIFOs at any component', { timeout: 5_000 }, async (t) => {
  const { root, outside } = await fixture(t);
  await mkdir(join(root, 'a'));
  await symlink(outside, join(root, 'a/link'));
  await writeFile(join(root, 'file'), 'x');
  mkfifo(join(root, 'pipe'));
  const fail = async (segments: string[]) =>
    openDirPath(root, segments).then(
      async (d) => {
        await d.close();
        return 'opened';
      },
      (e: unknown) => errno(e),
    );
  // Linux answers O_DIRECTORY|O_NOFOLLOW on a symlink with ENOTDIR (ELOOP on some versions); callers treat both alike.
  assert.match(String(await fail(['a', 'link'])), /^(ELOOP|ENOTDIR)$/);
  assert.equal(await fail(['file']), 'ENOTDIR');
  assert.equal(await fail(['pipe']), 'ENOTDIR');
  assert.equal(await fail(['missing']), 'ENOENT');
  assert.equal(await fail(['a']), 'opened');
});
