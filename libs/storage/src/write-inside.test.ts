import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lstat, mkdir, readFile, readdir, readlink, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { SECRET, code, fixture, hammer, startSwapper } from './hostile-fixture.ts';
import { writeFileInside } from './write-inside.ts';

const from = (s: string | Buffer) => Readable.from([Buffer.from(s)]);
const opts = { maxBytes: 1024 * 1024, overwrite: false };

/** Every name under dir, recursively, to prove nothing (temp files included) was left behind. */
async function names(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).map(String).sort();
}

test('writes a file, creating parents, and returns its stat', async (t) => {
  const { root } = await fixture(t);
  const st = await writeFileInside(root, 'out/charts/a.png', from('png bytes'), opts);
  assert.equal(await readFile(join(root, 'out/charts/a.png'), 'utf8'), 'png bytes');
  assert.equal(st.size, 9);
  assert.equal(st.ino, (await stat(join(root, 'out/charts/a.png'))).ino);
  assert.equal(st.mode & 0o777, 0o644);
  assert.equal((await stat(join(root, 'out'))).mode & 0o777, 0o755);
  assert.deepEqual(await names(root), ['out', 'out/charts', 'out/charts/a.png']);
});

test('chowns new directories and the file to the owner', async (t) => {
  const { root } = await fixture(t);
  await mkdir(join(root, 'existing'));
  await writeFileInside(root, 'existing/new/f.txt', from('x'), { ...opts, owner: { uid: 1000, gid: 1000 } });
  for (const p of ['existing/new', 'existing/new/f.txt']) {
    const st = await stat(join(root, p));
    assert.deepEqual([st.uid, st.gid], [1000, 1000], p);
  }
  assert.equal((await stat(join(root, 'existing'))).uid, 0, 'existing directories are left alone');
});

test('overwrite=false on an existing name → file_exists, old content intact', async (t) => {
  const { root } = await fixture(t);
  await writeFile(join(root, 'data.csv'), 'old');
  await assert.rejects(writeFileInside(root, 'data.csv', from('new'), opts), code('file_exists'));
  assert.equal(await readFile(join(root, 'data.csv'), 'utf8'), 'old');
  await symlink('/etc/passwd', join(root, 'link'));
  await assert.rejects(writeFileInside(root, 'link', from('new'), opts), code('file_exists'));
  assert.deepEqual(await names(root), ['data.csv', 'link']);
});

test('overwrite=true replaces a file, replaces a symlink itself (not its target), refuses a directory', async (t) => {
  const { root, outside } = await fixture(t);
  await writeFile(join(root, 'data.csv'), 'old');
  await writeFileInside(root, 'data.csv', from('new'), { ...opts, overwrite: true });
  assert.equal(await readFile(join(root, 'data.csv'), 'utf8'), 'new');
  await symlink(join(outside, 'secret.txt'), join(root, 'link'));
  await writeFileInside(root, 'link', from('replaced'), { ...opts, overwrite: true });
  assert.ok((await lstat(join(root, 'link'))).isFile());
  assert.equal(await readFile(join(outside, 'secret.txt'), 'utf8'), SECRET);
  await mkdir(join(root, 'dir/sub'), { recursive: true });
  await assert.rejects(writeFileInside(root, 'dir', from('x'), { ...opts, overwrite: true }), code('file_exists'));
  assert.deepEqual(await names(root), ['data.csv', 'dir', 'dir/sub', 'link']);
});

test('refuses to create through a symlinked or non-directory parent and writes nothing outside', async (t) => {
  const { root, outside } = await fixture(t);
  await symlink(outside, join(root, 'out'));
  await symlink('/etc', join(root, 'etc'));
  await writeFile(join(root, 'file'), 'f');
  await assert.rejects(writeFileInside(root, 'out/new.txt', from('x'), opts), code('invalid_path'));
  await assert.rejects(writeFileInside(root, 'out/deeper/new.txt', from('x'), opts), code('invalid_path'));
  await assert.rejects(
    writeFileInside(root, 'etc/passwd', from('x'), { ...opts, overwrite: true }),
    code('invalid_path'),
  );
  await assert.rejects(writeFileInside(root, 'file/new.txt', from('x'), opts), code('invalid_path'));
  assert.deepEqual(await names(outside), ['secret.txt']);
  assert.equal(await readlink(join(root, 'out')), outside);
});

test('invalid paths are refused before anything is created', async (t) => {
  const { root } = await fixture(t);
  for (const p of ['../outside/x', '/tmp/x', 'a/../../x', '.sandgate-tmp-x', 'a//b']) {
    await assert.rejects(writeFileInside(root, p, from('x'), opts), code('invalid_path'));
  }
  assert.deepEqual(await names(root), []);
});

test('maxBytes exceeded → payload_too_large, no temp file left, source stopped early', async (t) => {
  const { root } = await fixture(t);
  let produced = 0;
  let finished = false;
  const chunk = Buffer.alloc(64 * 1024, 1);
  const source = Readable.from(
    (function* () {
      for (let i = 0; i < 1600; i++) {
        // 100 MB if read to the end
        produced += chunk.length;
        yield chunk;
      }
      finished = true;
    })(),
  );
  await assert.rejects(
    writeFileInside(root, 'big.bin', source, { ...opts, maxBytes: 1024 * 1024 }),
    code('payload_too_large'),
  );
  assert.ok(!finished && produced < 4 * 1024 * 1024, `read ${produced} bytes`);
  assert.ok(source.destroyed);
  assert.deepEqual(await names(root), []);
});

test('exactly maxBytes is accepted; a failing source leaves no temp file', async (t) => {
  const { root } = await fixture(t);
  const st = await writeFileInside(root, 'exact.bin', from(Buffer.alloc(1000)), { ...opts, maxBytes: 1000 });
  assert.equal(st.size, 1000);
  const failing = new Readable({
    read() {
      this.push(Buffer.from('part'));
      this.destroy(new Error('client went away'));
    },
  });
  await assert.rejects(writeFileInside(root, 'partial.bin', failing, opts), /client went away/);
  assert.deepEqual(await names(root), ['exact.bin']);
});

test('a large stream is written intact without buffering it whole', async (t) => {
  const { root } = await fixture(t);
  const chunk = Buffer.alloc(256 * 1024, 7);
  const source = Readable.from(
    (function* () {
      for (let i = 0; i < 80; i++) yield chunk;
    })(),
  ); // 20 MB
  const before = process.memoryUsage().rss;
  const st = await writeFileInside(root, 'big.bin', source, { ...opts, maxBytes: 50 * 1024 * 1024 });
  assert.equal(st.size, 20 * 1024 * 1024);
  assert.ok(process.memoryUsage().rss - before < 15 * 1024 * 1024, 'memory stayed flat');
});

test('never writes outside while another process keeps swapping the parent directory', async (t) => {
  const fx = await fixture(t);
  const stop = await startSwapper(fx, 'd', fx.outside);
  let written = 0;
  let refused = 0;
  await hammer(3_000, 200, async (i) => {
    try {
      await writeFileInside(fx.root, `d/f${i}.txt`, from('x'), opts);
      written++;
    } catch (e) {
      code('invalid_path')(e);
      refused++;
    }
    return written > 30 && refused > 30;
  });
  await stop();
  t.diagnostic(`written ${written}, refused ${refused}`);
  assert.ok(written > 0 && refused > 0, 'the race was exercised both ways');
  assert.deepEqual(await names(fx.outside), ['secret.txt']);
  // Every file landed inside root: in the real directory, or in one created while it was away (then moved aside).
  const files = (await names(fx.root)).filter((n) => /^d(\.a|\.stray\d+)?\/f\d+\.txt$/.test(n));
  assert.equal(files.length, written);
  assert.ok(!(await names(fx.root)).some((n) => n.includes('.sandgate')), 'no temp file left');
});
