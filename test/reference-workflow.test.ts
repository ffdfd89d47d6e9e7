import { test } from 'node:test';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack } from './harness.ts';
import { referenceWorkflow } from './reference-workflow.ts';

const KEY = 'reference-workflow-key-0123456789';

test('reference workflow through @sandgate/client: upload a CSV, chart + PDF report, download, a broken run, the fix', async (t) => {
  // On the quick start's data disk: every session a subvolume with its disk quota.
  const s = await startStack({ diskQuotas: true, env: { SANDGATE_API_KEYS: `${KEY}:tenantA` } });
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-reference-'));
  t.after(async () => {
    await s.close();
    await rm(dir, { recursive: true, force: true });
  });
  await referenceWorkflow(s.url, KEY, dir);
});
