import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { link, mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { code, fixture, mkfifo } from './hostile-fixture.ts';
import { sha256Inside } from './sha256-inside.ts';

const hex = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

test('hashes the whole file and reports the bytes hashed', async (t) => {
  const { root } = await fixture(t);
  const big = randomBytes(3 * 256 * 1024 + 17); // several read chunks and a ragged end
  await mkdir(join(root, 'out'));
  await writeFile(join(root, 'out/big.bin'), big);
  await writeFile(join(root, 'empty'), '');
  assert.deepEqual(await sha256Inside(root, 'out/big.bin'), { sha256: hex(big), size: big.length });
  assert.deepEqual(await sha256Inside(root, 'empty'), { sha256: hex(''), size: 0 });
});

test('never hashes through a symlink, a FIFO or a hard link', { timeout: 5_000 }, async (t) => {
  const { root, outside } = await fixture(t);
  await symlink('/etc/passwd', join(root, 'passwd'));
  await symlink('/etc', join(root, 'etc'));
  await symlink(outside, join(root, 'out'));
  await link(join(outside, 'secret.txt'), join(root, 'hard.txt'));
  mkfifo(join(root, 'pipe'));
  for (const p of ['passwd', 'etc/passwd', 'out/secret.txt', 'hard.txt', 'pipe', 'missing']) {
    await assert.rejects(sha256Inside(root, p), code('file_not_found'), p);
  }
});
