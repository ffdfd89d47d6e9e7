import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';
import { noopBackend } from './noop-backend.ts';

const KEY_A = 'a'.repeat(32);
const KEY_B = 'b'.repeat(32);
const MiB = 1024 * 1024;
const file = (path: string, bytes: number) => ({ path, content_base64: Buffer.alloc(bytes, 7).toString('base64') });
const RAW = { 'content-type': 'application/octet-stream' };

test("a tenant's uploads and what its runs write count against its storage quota; over it, uploads and runs are refused", async (t) => {
  const s = await startStack({
    env: {
      SANDGATE_API_KEYS: `${KEY_A}:tenantA,${KEY_B}:tenantB`,
      SANDGATE_TENANT_LIMITS: JSON.stringify({ tenantA: { storage_bytes: 3 * MiB } }),
    },
  });
  t.after(() => s.close());
  const as =
    (key: string) =>
    (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
      s.api(method, path, body, { authorization: `Bearer ${key}`, ...headers });
  /** A raw upload of `bytes` bytes: JSON bodies are bounded to 1 MiB. */
  const put = (key: string, sessionId: string, path: string, bytes: number, query = '') =>
    as(key)('PUT', `/v1/sessions/${sessionId}/files/${path}${query}`, 'x'.repeat(bytes), RAW);
  const a = as(KEY_A);
  const b = as(KEY_B);
  const session = (await a('POST', '/v1/sessions', {})).body.id as string;

  assert.equal((await put(KEY_A, session, 'one.bin', 2 * MiB)).status, 201);
  const over = await put(KEY_A, session, 'two.bin', 2 * MiB);
  assert.equal(over.status, 413, JSON.stringify(over.body));
  assert.equal(over.body.code, 'storage_quota_exceeded');
  const listed = (await a('GET', `/v1/sessions/${session}/files`)).body.files.map((f: any) => [f.path, f.size_bytes]);
  assert.deepEqual(listed, [['one.bin', 2 * MiB]], 'the refused file is not kept, the earlier one is intact');
  // An overwrite past the quota leaves the old file as it was.
  const bigger = await put(KEY_A, session, 'one.bin', 2 * MiB, '?overwrite=true');
  assert.equal(bigger.body.code, 'storage_quota_exceeded');
  assert.equal((await a('GET', `/v1/sessions/${session}/files`)).body.files[0].size_bytes, 2 * MiB);

  // Another tenant is not touched by A's quota.
  const other = (await b('POST', '/v1/sessions', {})).body.id as string;
  for (const name of ['x.bin', 'y.bin']) assert.equal((await put(KEY_B, other, name, 2 * MiB)).status, 201);

  // A run may write within its session's disk quota; what it wrote then counts.
  const run = await a('POST', '/v1/executions?wait=60', {
    session_id: session,
    language: 'python',
    code: 'open("made.bin", "wb").write(b"z" * (1536 * 1024))',
  });
  assert.equal(run.body.state, 'completed', JSON.stringify(run.body.result));
  const refused = await a('POST', '/v1/executions?wait=60', {
    session_id: session,
    language: 'python',
    code: 'print(1)',
  });
  assert.equal(refused.status, 413, JSON.stringify(refused.body));
  assert.equal(refused.body.code, 'storage_quota_exceeded');
  assert.equal(
    (await a('POST', `/v1/sessions/${session}/files`, file('small.bin', 10))).body.code,
    'storage_quota_exceeded',
  );

  // Deleting makes room again.
  assert.equal((await a('DELETE', `/v1/sessions/${session}/files/made.bin`)).status, 204);
  const again = await a('POST', '/v1/executions?wait=60', {
    session_id: session,
    language: 'python',
    code: 'print("room")',
  });
  assert.equal(again.body.result?.stdout, 'room\n');
  // Closing the session frees all it held.
  assert.equal((await a('DELETE', `/v1/sessions/${session}`)).status, 204);
  const fresh = (await a('POST', '/v1/sessions', {})).body.id as string;
  assert.equal((await put(KEY_A, fresh, 'back.bin', 2 * MiB)).status, 201);
});

test('uploads are refused with insufficient_storage while the data directory is short of free space', async (t) => {
  const s = await startStack({ worker: noopBackend, env: { SANDGATE_MIN_FREE_BYTES: '100000000GiB' } });
  t.after(() => s.close());
  const session = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const r = await s.api('POST', `/v1/sessions/${session}/files`, file('a.txt', 10));
  assert.equal(r.status, 507, JSON.stringify(r.body));
  assert.equal(r.body.code, 'insufficient_storage');
  assert.deepEqual((await s.api('GET', `/v1/sessions/${session}/files`)).body.files, []);
});
