import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { buildOutdated, ensureDashboardBuilt, sourceHash } from './build.ts';
import { DASHBOARD_DIR, SOURCE_HASH_FILE } from './index.ts';

test('the build records the hash of its sources and is not redone while they are unchanged', async () => {
  await ensureDashboardBuilt();
  assert.equal(await buildOutdated(), null);
  assert.equal((await readFile(join(DASHBOARD_DIR, SOURCE_HASH_FILE), 'utf8')).trim(), await sourceHash());
  const built = (await stat(join(DASHBOARD_DIR, 'index.html'))).mtimeMs;
  assert.equal(await ensureDashboardBuilt(), 'dashboard build up to date');
  assert.equal((await stat(join(DASHBOARD_DIR, 'index.html'))).mtimeMs, built);
  assert.match(
    await readFile(join(DASHBOARD_DIR, 'index.html'), 'utf8'),
    /<script type="module" crossorigin src="\/dashboard\/assets\//,
  );
});
