import { test } from 'node:test';
import assert from 'node:assert/strict';
import { link, mkdir, readFile, readdir, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SECRET, code, fixture, mkfifo, startSwapper } from './hostile-fixture.ts';
import { removeInside } from './remove-inside.ts';

async function outsideIntact(outside: string): Promise<void> {
  assert.deepEqual(await readdir(outside), ['secret.txt']);
  assert.equal(await readFile(join(outside, 'secret.txt'), 'utf8'), SECRET);
}

test('removes a file; a missing one is file_not_found', async (t) => {
  const { root } = await fixture(t);
  await mkdir(join(root, 'a'));
  await writeFile(join(root, 'a/f.txt'), 'x');
  await removeInside(root, 'a/f.txt');
  assert.deepEqual(await readdir(join(root, 'a')), []);
  await assert.rejects(removeInside(root, 'a/f.txt'), code('file_not_found'));
  await assert.rejects(removeInside(root, 'nope/f.txt'), code('file_not_found'));
  await assert.rejects(removeInside(root, '../outside/secret.txt'), code('invalid_path'));
});

test('removes a symlink itself, never its target', async (t) => {
  const { root, outside } = await fixture(t);
  await symlink('/etc/passwd', join(root, 'passwd'));
  await symlink(join(outside, 'secret.txt'), join(root, 'secret'));
  await symlink(outside, join(root, 'outdir'));
  for (const p of ['passwd', 'secret', 'outdir']) await removeInside(root, p);
  assert.deepEqual(await readdir(root), []);
  assert.ok((await stat('/etc/passwd')).isFile());
  await outsideIntact(outside);
});

test('does not follow a symlinked parent', async (t) => {
  const { root, outside } = await fixture(t);
  await symlink(outside, join(root, 'out'));
  await symlink('/etc', join(root, 'etc'));
  await assert.rejects(removeInside(root, 'out/secret.txt'), code('file_not_found'));
  await assert.rejects(removeInside(root, 'etc/passwd'), code('file_not_found'));
  await outsideIntact(outside);
});

test('removes a directory tree full of hostile entries without reaching outside', async (t) => {
  const { root, outside } = await fixture(t);
  const d = join(root, 'd');
  await mkdir(join(d, 'sub/deeper'), { recursive: true });
  await writeFile(join(d, 'sub/deeper/f.txt'), 'x');
  await symlink(outside, join(d, 'sub/outdir'));
  await symlink(join(outside, 'secret.txt'), join(d, 'secret'));
  await symlink('/etc', join(d, 'etc'));
  await link(join(outside, 'secret.txt'), join(d, 'hardlink'));
  mkfifo(join(d, 'pipe'));
  await writeFile(Buffer.concat([Buffer.from(`${d}/bad-`), Buffer.from([0xff, 0xfe])]), 'not utf-8');
  await writeFile(join(d, 'back\\slash\nnewline'), 'x');
  await removeInside(root, 'd');
  assert.deepEqual(await readdir(root), []);
  await outsideIntact(outside);
  assert.equal((await stat(join(outside, 'secret.txt'))).nlink, 1);
});

test('removes trees deeper than the fds it is willing to hold', async (t) => {
  const { root } = await fixture(t);
  const deep = join(root, 'd', ...Array(150).fill('x'));
  await mkdir(deep, { recursive: true });
  await writeFile(join(deep, 'bottom.txt'), 'x');
  await writeFile(join(root, 'd', ...Array(70).fill('x'), 'middle.txt'), 'x');
  await removeInside(root, 'd');
  assert.deepEqual(await readdir(root), []);
});

test('never deletes outside while another process keeps swapping a directory inside the tree', async (t) => {
  let removed = 0;
  for (let i = 0; i < 6; i++) {
    const fx = await fixture(t);
    // Same names inside and out, so a path-based remover that lists one and unlinks through the other has many chances.
    const names = Array.from({ length: 200 }, (_, k) => `f${k}.txt`);
    for (const n of names) await writeFile(join(fx.outside, n), 'outside');
    await mkdir(join(fx.root, 'top'));
    const stop = await startSwapper(fx, 'top/d', fx.outside, Object.fromEntries(names.map((n) => [n, 'inside'])));
    // Losing the race is allowed (an error, or leftovers the swapper put back); reaching outside is not.
    await removeInside(fx.root, 'top').then(
      () => removed++,
      (e) => t.diagnostic(String(e)),
    );
    await stop();
    assert.equal((await readdir(fx.outside)).length, 201);
    assert.equal(await readFile(join(fx.outside, 'secret.txt'), 'utf8'), SECRET);
  }
  t.diagnostic(`removed cleanly ${removed} of 6`);
});
