import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fixture } from './hostile-fixture.ts';
import { openRoot } from './fd-path.ts';
import { removeDirAt } from './remove-tree.ts';

async function removeUnder(root: string, name: string): Promise<void> {
  const dir = await openRoot(root);
  try {
    await removeDirAt(dir, name);
  } finally {
    await dir.close();
  }
}

test('removes wide and deep trees, bytes-named entries included', async (t) => {
  const { root } = await fixture(t);
  const wide = join(root, 't/wide');
  await mkdir(wide, { recursive: true });
  for (let i = 0; i < 300; i++) await writeFile(join(wide, `f${i}`), 'x');
  await mkdir(join(root, 't', ...Array(200).fill('d')), { recursive: true });
  await writeFile(Buffer.concat([Buffer.from(`${root}/t/`), Buffer.from([0xc3, 0x28])]), 'invalid UTF-8');
  await removeUnder(root, 't');
  assert.deepEqual(await readdir(root), []);
});

test('a symlink or file where the directory was is unlinked, never followed; missing is fine', async (t) => {
  const { root, outside } = await fixture(t);
  await symlink(outside, join(root, 'link'));
  await writeFile(join(root, 'file'), 'x');
  await removeUnder(root, 'link');
  await removeUnder(root, 'file');
  await removeUnder(root, 'missing');
  assert.deepEqual(await readdir(root), []);
  assert.deepEqual(await readdir(outside), ['secret.txt']);
});
