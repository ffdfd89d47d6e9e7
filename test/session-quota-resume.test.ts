import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';

const KEY = 'quota-resume-key-0123456789ab';
const MiB = 1024 * 1024;
const RAW = { 'content-type': 'application/octet-stream' };

test('a tenant at its storage quota resumes its paused sessions: their bytes are counted once', async (t) => {
  const s = await startStack({
    env: {
      SANDGATE_API_KEYS: `${KEY}:acme`,
      SANDGATE_TENANT_LIMITS: JSON.stringify({ acme: { storage_bytes: 2 * MiB } }),
    },
    apiKey: KEY,
  });
  t.after(() => s.close());
  /** What the tenant's storage ledger counts (what the quota bounds). */
  const used = () => s.deps.ledger.total('acme');

  for (const mode of ['process', 'stateful'] as const) {
    await t.test(`a ${mode} session`, async () => {
      const id = (await s.api('POST', '/v1/sessions', { mode })).body.id as string;
      const first = await s.api('POST', '/v1/executions?wait=60', {
        session_id: id,
        language: 'python',
        code: mode === 'stateful' ? 'kept = 7\nprint("up")' : 'print("up")',
      });
      assert.equal(first.body.result?.state, 'completed', JSON.stringify(first.body));
      const paused = await s.api('POST', `/v1/sessions/${id}/pause`);
      assert.equal(paused.status, 200, JSON.stringify(paused.body));
      // Fill the quota to the last byte while paused: the tenant is at it.
      const held = await used();
      const fill = await s.api('PUT', `/v1/sessions/${id}/files/fill.bin`, 'x'.repeat(2 * MiB - held), RAW);
      assert.equal(fill.status, 201, JSON.stringify(fill.body));
      assert.equal(await used(), 2 * MiB, 'at the quota');
      const over = await s.api('PUT', `/v1/sessions/${id}/files/one-more.bin`, 'x', RAW);
      assert.equal(over.body.code, 'storage_quota_exceeded', 'a new byte is refused');

      const resumed = await s.api('POST', `/v1/sessions/${id}/resume`);
      assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
      assert.equal(resumed.body.session.state, 'idle');
      assert.ok(resumed.body.resumed);
      if (mode === 'stateful') assert.equal(resumed.body.resumed.variables.restored >= 1, true);
      assert.ok((await used()) <= 2 * MiB, 'the resume charged nothing more');
      assert.ok(await s.sessionSandbox(id), 'it has a sandbox again');

      // Paused again, a run brings it back as well: the run itself writes nothing.
      assert.equal((await s.api('POST', `/v1/sessions/${id}/pause`)).status, 200);
      const run = await s.api('POST', '/v1/executions?wait=60', {
        session_id: id,
        language: 'python',
        code: mode === 'stateful' ? 'print(kept, len(open("fill.bin").read()) > 0)' : 'print("back")',
      });
      assert.equal(run.status, 200, JSON.stringify(run.body));
      assert.equal(run.body.result.state, 'completed', run.body.result.stderr);
      assert.ok(run.body.result.resumed);
      if (mode === 'stateful') assert.equal(run.body.result.stdout, '7 True\n');
      // What it writes takes the tenant over its quota, and then nothing more runs until files go.
      const write = await s.api('POST', '/v1/executions?wait=60', {
        session_id: id,
        language: 'python',
        code: 'open("more.bin", "w").write("y" * 4096)',
      });
      assert.equal(write.body.result?.state, 'completed', JSON.stringify(write.body));
      const refused = await s.api('POST', '/v1/executions?wait=60', { session_id: id, language: 'python', code: '1' });
      assert.equal(refused.status, 413, JSON.stringify(refused.body));
      assert.equal(refused.body.code, 'storage_quota_exceeded');
      assert.equal((await s.api('DELETE', `/v1/sessions/${id}`)).status, 204);
    });
  }
});
