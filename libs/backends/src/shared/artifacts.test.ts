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
  const artifacts = await collectArtifacts(root, before, opts);
  assert.deepEqual(artifacts, [
    {
      path: 'edit.csv', filename: 'edit.csv', size_bytes: 8, mime_type: 'text/csv',
      sha256: createHash('sha256').update('a,b\n1,2\n').digest('hex'), download_url: '/files/sess_000000000001/edit.csv',
    },
    {
      path: 'out/chart.png', filename: 'chart.png', size_bytes: 4, mime_type: 'image/png',
      sha256: createHash('sha256').update(Buffer.from([0x89, 0x50, 0x4e, 0x47])).digest('hex'),
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
  const artifacts = await collectArtifacts(root, before, opts);
  assert.deepEqual(artifacts.map((a) => a.path), ['data.bin']);
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
  const artifacts = await collectArtifacts(root, before, opts);
  assert.deepEqual(artifacts.map((a) => a.path), ['real.txt']);
});

test('at most maxArtifacts are reported, first by path', async (t) => {
  const root = await tempRoot(t);
  const before = await snapshot(root);
  for (let i = 0; i < 5; i++) await writeFile(join(root, `f${i}.txt`), String(i));
  const artifacts = await collectArtifacts(root, before, { ...opts, maxArtifacts: 3 });
  assert.deepEqual(artifacts.map((a) => a.path), ['f0.txt', 'f1.txt', 'f2.txt']);
});
