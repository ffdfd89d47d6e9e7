import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { link, mkdir, mkdtemp, rm, symlink, utimes, writeFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collectArtifacts, snapshot } from './artifacts.ts';

const artifactUrl = (s: string, p: string): string => `/files/${s}/${p}`;
const opts = { sessionId: 'sess_000000000001', artifactUrl };

async function tempRoot(t: import('node:test').TestContext): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'sandgate-artifacts-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  return root;
}

test('reports new and changed files with size, mime, sha256 and URL; unchanged ones are not', async (t) => {
  const root = await tempRoot(t);
  await writeFile(join(root, 'same.txt'), 'unchanged');
  await writeFile(join(root, 'edit.csv'), 'a,b\n');
  const before = await snapshot(root);
  await writeFile(join(root, 'edit.csv'), 'a,b\n1,2\n');
  await mkdir(join(root, 'out'));
  await writeFile(join(root, 'out', 'chart.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47]));
  const { artifacts } = await collectArtifacts(root, before, opts);
  assert.deepEqual(artifacts, [
    {
      path: 'edit.csv',
      filename: 'edit.csv',
      size_bytes: 8,
      mime_type: 'text/csv',
      sha256: createHash('sha256').update('a,b\n1,2\n').digest('hex'),
      download_url: '/files/sess_000000000001/edit.csv',
    },
    {
      path: 'out/chart.png',
      filename: 'chart.png',
      size_bytes: 4,
      mime_type: 'image/png',
      sha256: createHash('sha256')
        .update(Buffer.from([0x89, 0x50, 0x4e, 0x47]))
        .digest('hex'),
      download_url: '/files/sess_000000000001/out/chart.png',
    },
  ]);
});

test('a rewrite that keeps size and mtime is still caught', async (t) => {
  const root = await tempRoot(t);
  const file = join(root, 'data.bin');
  await writeFile(file, 'AAAA');
  const { atime, mtime } = await stat(file);
  const before = await snapshot(root);
  await writeFile(file, 'BBBB');
  await utimes(file, atime, mtime);
  const { artifacts } = await collectArtifacts(root, before, opts);
  assert.deepEqual(
    artifacts.map((a) => a.path),
    ['data.bin'],
  );
});

test('symlinks, FIFOs and hard links are never reported', async (t) => {
  const root = await tempRoot(t);
  const before = await snapshot(root);
  await symlink('/etc/passwd', join(root, 'passwd-link'));
  await symlink('/etc', join(root, 'etc-link'));
  execFileSync('mkfifo', [join(root, 'pipe')]);
  await writeFile(join(root, 'one.txt'), 'shared inode');
  await link(join(root, 'one.txt'), join(root, 'two.txt'));
  await link('/etc/hostname', join(root, 'host')).catch(() => {}); // cross-device on most hosts; tried anyway
  await writeFile(join(root, 'real.txt'), 'ok');
  const { artifacts } = await collectArtifacts(root, before, opts);
  assert.deepEqual(
    artifacts.map((a) => a.path),
    ['real.txt'],
  );
});

test('at most maxArtifacts are reported, first by path', async (t) => {
  const root = await tempRoot(t);
  const before = await snapshot(root);
  for (let i = 0; i < 5; i++) await writeFile(join(root, `f${i}.txt`), String(i));
  const { artifacts, truncated } = await collectArtifacts(root, before, { ...opts, maxArtifacts: 3 });
  assert.deepEqual(
    artifacts.map((a) => a.path),
    ['f0.txt', 'f1.txt', 'f2.txt'],
  );
  assert.equal(truncated, true);
  assert.equal((await collectArtifacts(root, before, opts)).truncated, false);
});

test('the bytes hashed are bounded: sparse 1 TiB files are left out at once, smaller ones still fit', async (t) => {
  const root = await tempRoot(t);
  const before = await snapshot(root);
  for (let i = 0; i < 1000; i++)
    execFileSync('truncate', ['-s', '1T', join(root, `sparse-${String(i).padStart(4, '0')}`)]);
  await writeFile(join(root, 'small.txt'), 'kept');
  const { artifacts, truncated } = await collectArtifacts(root, before, { ...opts, maxHashBytes: 1024 ** 2 });
  assert.deepEqual(
    artifacts.map((a) => a.path),
    ['small.txt'],
  );
  assert.equal(truncated, true);
});

test('a harvest stops when the run is cancelled and when its deadline passes, with what it hashed by then', async (t) => {
  const root = await tempRoot(t);
  const before = await snapshot(root);
  // Real bytes: 64 MiB each, far more than 1 ms lets one hash.
  for (const name of ['a.bin', 'b.bin']) await writeFile(join(root, name), Buffer.alloc(64 * 1024 ** 2, 1));
  const cancelled = new AbortController();
  cancelled.abort(new Error('cancelled'));
  const stopped = await collectArtifacts(root, before, { ...opts, signal: cancelled.signal });
  assert.deepEqual(stopped, { artifacts: [], truncated: true });
  const late = await collectArtifacts(root, before, { ...opts, deadlineMs: 1 });
  assert.equal(late.truncated, true);
  assert.ok(late.artifacts.length < 2, 'the deadline ended it before both files were hashed');
});
