import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { link, mkdir, rename, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { code, fixture, hammer, mkfifo, mknodNull, startSwapper } from './hostile-fixture.ts';
import { comparePaths, walkTree } from './walk-tree.ts';

const paths = async (root: string, opts?: Parameters<typeof walkTree>[1]) =>
  (await walkTree(root, opts)).entries.map((e) => e.path);

test('lists regular files recursively, sorted, with their stat fields', async (t) => {
  const { root } = await fixture(t);
  await mkdir(join(root, 'out/charts'), { recursive: true });
  await mkdir(join(root, 'empty'));
  await writeFile(join(root, 'out/charts/b.png'), 'bb');
  await writeFile(join(root, 'out/a.csv'), 'a');
  await writeFile(join(root, 'z.txt'), 'zzz');
  await writeFile(join(root, 'out-2.txt'), '');
  const { entries, truncated } = await walkTree(root);
  assert.equal(truncated, false);
  // Walk order: segment by segment, so a directory's files come right after its name (`out/…` before `out-2.txt`).
  assert.deepEqual(
    entries.map((e) => [e.path, e.size]),
    [
      ['out/a.csv', 1],
      ['out/charts/b.png', 2],
      ['out-2.txt', 0],
      ['z.txt', 3],
    ],
  );
  const st = await stat(join(root, 'z.txt'));
  assert.deepEqual(entries[3], {
    path: 'z.txt',
    size: 3,
    mtimeMs: st.mtimeMs,
    ino: st.ino,
    dev: st.dev,
    ctimeMs: st.ctimeMs,
  });
});

test('skips and never follows symlinks, special files and hard links', async (t) => {
  const { root, outside } = await fixture(t);
  await writeFile(join(root, 'ok.txt'), 'ok');
  await symlink('/etc/passwd', join(root, 'passwd'));
  await symlink('/etc', join(root, 'etc'));
  await symlink(outside, join(root, 'out'));
  await symlink('.', join(root, 'loop'));
  mkfifo(join(root, 'pipe'));
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(join(root, 'sock'), resolve));
  t.after(() => server.close());
  if (!mknodNull(join(root, 'null'))) t.diagnostic('mknod not permitted here; device case skipped');
  await link(join(outside, 'secret.txt'), join(root, 'hard-outside.txt'));
  await writeFile(join(root, 'a.txt'), 'a');
  await link(join(root, 'a.txt'), join(root, 'b.txt'));
  assert.deepEqual(await paths(root), ['ok.txt']);
});

test('skips what a client could not address: reserved, control-character and non-UTF-8 names', async (t) => {
  const { root } = await fixture(t);
  await mkdir(join(root, '.sandgate-state'));
  await writeFile(join(root, '.sandgate-state/x.txt'), 'x');
  await writeFile(join(root, '.sandgate-tmp-123'), 'partial upload');
  await writeFile(join(root, 'new\nline.txt'), 'x');
  await writeFile(join(root, 'back\\slash.txt'), 'x');
  await writeFile(Buffer.concat([Buffer.from(`${root}/bad-`), Buffer.from([0xff]), Buffer.from('.txt')]), 'x');
  await writeFile(join(root, 'bad-\uFFFD.txt'), 'a real name that the mangled one above would collide with');
  await writeFile(join(root, '.hidden'), 'dotfiles are fine');
  assert.deepEqual(await paths(root), ['.hidden', 'bad-\uFFFD.txt']);
});

test('stops after maxEntries files with truncated: true', async (t) => {
  const { root } = await fixture(t);
  for (let i = 0; i < 5; i++) await writeFile(join(root, `f${i}`), 'x');
  assert.deepEqual(await walkTree(root, { maxEntries: 5 }).then((r) => [r.entries.length, r.truncated]), [5, false]);
  const cut = await walkTree(root, { maxEntries: 3 });
  assert.deepEqual([cut.entries.map((e) => e.path), cut.truncated], [['f0', 'f1', 'f2'], true]);
});

test('stops at maxDepth with truncated: true; the default reaches the deepest path a client may use', async (t) => {
  const { root } = await fixture(t);
  await mkdir(join(root, 'a/b/c'), { recursive: true });
  await writeFile(join(root, 'top'), 'x');
  await writeFile(join(root, 'a/b/three'), 'x');
  await writeFile(join(root, 'a/b/c/four'), 'x');
  assert.deepEqual(await walkTree(root, { maxDepth: 4 }).then((r) => [r.entries.length, r.truncated]), [3, false]);
  const cut = await walkTree(root, { maxDepth: 3 });
  assert.deepEqual([cut.entries.map((e) => e.path), cut.truncated], [['a/b/three', 'top'], true]);
  assert.deepEqual(await paths(root, { maxDepth: 1 }), ['top']);
  const deep = Array(31).fill('d');
  await mkdir(join(root, ...deep, 'e'), { recursive: true });
  await writeFile(join(root, ...deep, 'at-32'), 'x');
  await writeFile(join(root, ...deep, 'e', 'at-33'), 'x');
  const full = await walkTree(root);
  assert.ok(full.entries.some((e) => e.path.endsWith('/at-32')));
  assert.ok(!full.entries.some((e) => e.path.endsWith('/at-33')));
  assert.equal(full.truncated, true);
});

test('a directory swapped for a symlink between calls is not listed; a missing root is file_not_found', async (t) => {
  const { root, outside } = await fixture(t);
  await mkdir(join(root, 'd'));
  await writeFile(join(root, 'd/inside.txt'), 'x');
  assert.deepEqual(await paths(root), ['d/inside.txt']);
  await rename(join(root, 'd'), join(root, 'd.old'));
  await symlink(outside, join(root, 'd'));
  assert.deepEqual(await paths(root), ['d.old/inside.txt']);
  await assert.rejects(walkTree(join(root, 'missing')), code('file_not_found'));
});

test('never lists outside while another process keeps swapping a directory and a symlink', async (t) => {
  const fx = await fixture(t);
  await startSwapper(fx, 'd', fx.outside, { 'inside.txt': 'x' });
  const seen = new Set<string>();
  await hammer(2_000, 300, async (i) => {
    for (const p of await paths(fx.root)) {
      assert.ok(!p.endsWith('secret.txt'), p);
      seen.add(p);
    }
    return i >= 300 && seen.has('d/inside.txt');
  });
  t.diagnostic([...seen].sort().join(' '));
  assert.ok(seen.has('d/inside.txt'), 'the directory was listed while in place');
});

test('a listing resumes after any path it gave, page by page, in walk order, each file once', async (t) => {
  const { root } = await fixture(t);
  const all = ['a/b/c.txt', 'a/b-d.txt', 'a/x.txt', 'a-c.txt', 'b.txt', 'b0/z.txt'];
  for (const p of all) {
    await mkdir(join(root, p, '..'), { recursive: true });
    await writeFile(join(root, p), p);
  }
  assert.deepEqual(await paths(root), all, 'walk order');
  assert.deepEqual([...all].sort(comparePaths), all);
  for (const size of [1, 2, 4]) {
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await walkTree(root, { maxEntries: size, after });
      seen.push(...page.entries.map((e) => e.path));
      if (!page.more) break;
      after = page.entries.at(-1)!.path;
    }
    assert.deepEqual(seen, all, `pages of ${size}`);
  }
});
