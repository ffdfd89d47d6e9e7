import { test } from 'node:test';
import assert from 'node:assert/strict';
import { link, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SandgateError } from '@sandgate/contracts';
import { artifactImages, isImage, readSmallFile } from './artifact-bytes.ts';

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

async function session(t: { after(fn: () => Promise<void>): void }) {
  const base = await mkdtemp(join(tmpdir(), 'sandgate-mcp-'));
  t.after(() => rm(base, { recursive: true, force: true }));
  const dir = join(base, 'session');
  await mkdir(dir);
  await writeFile(join(base, 'secret.png'), PNG);
  return { base, dir };
}

test('readSmallFile reads up to the limit and reports the size past it', async (t) => {
  const { dir } = await session(t);
  await writeFile(join(dir, 'small.txt'), 'hello');
  await writeFile(join(dir, 'big.bin'), Buffer.alloc(101));
  assert.deepEqual(await readSmallFile(dir, 'small.txt', 5), { bytes: Buffer.from('hello') });
  assert.deepEqual(await readSmallFile(dir, 'big.bin', 100), { tooLarge: 101 });
});

test('readSmallFile never follows a symlink or a hard link the sandbox planted', async (t) => {
  const { base, dir } = await session(t);
  await symlink(join(base, 'secret.png'), join(dir, 'link.png'));
  await link(join(base, 'secret.png'), join(dir, 'hard.png'));
  for (const name of ['link.png', 'hard.png', 'missing.png']) {
    const notFound = (e: unknown) => e instanceof SandgateError && e.code === 'file_not_found';
    await assert.rejects(readSmallFile(dir, name, 1000), notFound, name);
  }
});

test('artifactImages returns the images within the byte budget and skips what it cannot show', async (t) => {
  const { base, dir } = await session(t);
  await writeFile(join(dir, 'a.png'), PNG);
  await writeFile(join(dir, 'b.png'), PNG);
  await writeFile(join(dir, 'notes.txt'), 'x');
  await symlink(join(base, 'secret.png'), join(dir, 'evil.png'));
  const list = [
    { path: 'notes.txt', mime_type: 'text/plain' },
    { path: 'evil.png', mime_type: 'image/png' },
    { path: 'gone.png', mime_type: 'image/png' },
    { path: 'a.png', mime_type: 'image/png' },
    { path: 'b.png', mime_type: 'image/png' },
  ];
  const one = await artifactImages(dir, list, PNG.length * 1.5);
  assert.deepEqual(one, [{ type: 'image', data: PNG.toString('base64'), mimeType: 'image/png' }]);
  assert.equal((await artifactImages(dir, list, PNG.length * 2)).length, 2);
  assert.equal(isImage('image/svg+xml'), false, 'an SVG is not sent as an image');
});
