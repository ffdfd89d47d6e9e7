import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { fixture, hammer, startSwapper } from './hostile-fixture.ts';

test('the swapper really alternates a directory and a symlink', async (t) => {
  const fx = await fixture(t);
  await startSwapper(fx, 'd', fx.outside);
  const seen = new Set<string>();
  await hammer(5_000, 0, async () => {
    const st = await lstat(join(fx.root, 'd')).catch(() => undefined);
    if (st) seen.add(st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'dir' : 'other');
    return seen.size === 2;
  });
  assert.deepEqual([...seen].sort(), ['dir', 'symlink']);
});
