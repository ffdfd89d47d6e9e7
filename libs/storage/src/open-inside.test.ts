import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { link, mkdir, readFile, rename, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SECRET, code, fixture, hammer, mkfifo, mknodNull, startFlipper, startSwapper } from './hostile-fixture.ts';
import { openInside } from './open-inside.ts';

async function read(root: string, rel: string): Promise<string> {
  const { handle, stat } = await openInside(root, rel);
  try {
    assert.ok(stat.isFile());
    return (await handle.readFile()).toString();
  } finally {
    await handle.close();
  }
}

test('opens regular files at the top and nested', async (t) => {
  const { root } = await fixture(t);
  await mkdir(join(root, 'a/b'), { recursive: true });
  await writeFile(join(root, 'top.txt'), 'top');
  await writeFile(join(root, 'a/b/deep.csv'), 'x,y\n');
  assert.equal(await read(root, 'top.txt'), 'top');
  const { handle, stat } = await openInside(root, 'a/b/deep.csv');
  await handle.close();
  assert.equal(stat.size, 4);
  assert.equal(stat.nlink, 1);
});

test('a symlink at the leaf is never opened', async (t) => {
  const { root, outside } = await fixture(t);
  await symlink('/etc/passwd', join(root, 'passwd'));
  await symlink(join(outside, 'secret.txt'), join(root, 'secret.txt'));
  await symlink('secret.txt', join(root, 'relative.txt'));
  for (const rel of ['passwd', 'secret.txt', 'relative.txt'])
    await assert.rejects(openInside(root, rel), code('file_not_found'));
});

test('a symlink as an intermediate directory is never followed', async (t) => {
  const { root, outside } = await fixture(t);
  await symlink('/etc', join(root, 'etc'));
  await symlink(outside, join(root, 'out'));
  await mkdir(join(root, 'a'));
  await symlink('..', join(root, 'a/up'));
  await assert.rejects(openInside(root, 'etc/passwd'), code('file_not_found'));
  await assert.rejects(openInside(root, 'out/secret.txt'), code('file_not_found'));
  await assert.rejects(openInside(root, 'a/up/out/secret.txt'), code('file_not_found'));
});

test('a FIFO is refused without hanging, even with no writer', { timeout: 5_000 }, async (t) => {
  const { root } = await fixture(t);
  mkfifo(join(root, 'pipe'));
  await assert.rejects(openInside(root, 'pipe'), code('file_not_found'));
  mkfifo(join(root, 'dirpipe'));
  await assert.rejects(openInside(root, 'dirpipe/x'), code('file_not_found'));
});

test('directories, sockets and device nodes are refused', async (t) => {
  const { root } = await fixture(t);
  await mkdir(join(root, 'dir'));
  await assert.rejects(openInside(root, 'dir'), code('file_not_found'));
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(join(root, 'sock'), resolve));
  t.after(() => server.close());
  await assert.rejects(openInside(root, 'sock'), code('file_not_found'));
  if (mknodNull(join(root, 'null'))) await assert.rejects(openInside(root, 'null'), code('file_not_found'));
  else t.diagnostic('mknod not permitted here; device case skipped');
});

test('a hard-linked file (nlink 2) is refused under either name', async (t) => {
  const { root, outside } = await fixture(t);
  await link(join(outside, 'secret.txt'), join(root, 'linked.txt'));
  await assert.rejects(openInside(root, 'linked.txt'), code('file_not_found'));
  await writeFile(join(root, 'a.txt'), 'a');
  await link(join(root, 'a.txt'), join(root, 'b.txt'));
  await assert.rejects(openInside(root, 'a.txt'), code('file_not_found'));
  await assert.rejects(openInside(root, 'b.txt'), code('file_not_found'));
});

test('missing files and invalid paths', async (t) => {
  const { root } = await fixture(t);
  await writeFile(join(root, 'f'), 'f');
  await assert.rejects(openInside(root, 'nope.txt'), code('file_not_found'));
  await assert.rejects(openInside(root, 'f/under-a-file'), code('file_not_found'));
  await assert.rejects(openInside(root, '../outside/secret.txt'), code('invalid_path'));
  await assert.rejects(openInside(root, '/etc/passwd'), code('invalid_path'));
});

test('a directory swapped for a symlink between calls is refused', async (t) => {
  const { root, outside } = await fixture(t);
  await mkdir(join(root, 'd'));
  await writeFile(join(root, 'd/secret.txt'), 'inside');
  assert.equal(await read(root, 'd/secret.txt'), 'inside');
  await rename(join(root, 'd'), join(root, 'd.old'));
  await symlink(outside, join(root, 'd'));
  await assert.rejects(openInside(root, 'd/secret.txt'), code('file_not_found'));
});

test('never reads outside while another process keeps swapping a directory and a symlink', async (t) => {
  const fx = await fixture(t);
  await startSwapper(fx, 'd', fx.outside, { 'secret.txt': 'inside' });
  let opened = 0;
  let refused = 0;
  await hammer(3_000, 300, async () => {
    try {
      assert.equal(await read(fx.root, 'd/secret.txt'), 'inside');
      opened++;
    } catch (e) {
      code('file_not_found')(e);
      refused++;
    }
    return opened > 50 && refused > 50;
  });
  t.diagnostic(`opened ${opened}, refused ${refused}`);
  assert.ok(opened > 0 && refused > 0, 'the race was exercised both ways');
  assert.equal(await readFile(join(fx.outside, 'secret.txt'), 'utf8'), SECRET);
});

test('a FIFO swapped in between the look and the open still cannot block', { timeout: 20_000 }, async (t) => {
  const fx = await fixture(t);
  await startFlipper(
    fx,
    'f',
    (p) => writeFile(p, 'inside'),
    async (p) => mkfifo(p),
  );
  let opened = 0;
  let refused = 0;
  await hammer(1_000, 300, async () => {
    try {
      assert.equal(await read(fx.root, 'f'), 'inside');
      opened++;
    } catch (e) {
      code('file_not_found')(e);
      refused++;
    }
  });
  t.diagnostic(`opened ${opened}, refused ${refused}`);
  assert.ok(opened > 0 && refused > 0, 'the race was exercised both ways');
});
