import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { keys, TransferGrants } from '@sandgate/state';
import { startStack } from './harness.ts';

/** /internal/transfer, where sandbox Pods fetch and send back a session's files: one token, one session, one run. */
test('transfer endpoints: only a live token, only its session, only while the session exists', async (t) => {
  const s = await startStack({ worker: false });
  t.after(() => s.close());
  const grants = new TransferGrants(s.deps.redis, keys(s.config.redisPrefix));
  const mine = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const other = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  assert.equal(
    (await s.api('PUT', `/v1/sessions/${other}/files/secret.txt`, 'other', { 'content-type': 'text/plain' })).status,
    201,
  );
  const token = await grants.grant({ execution_id: 'exec_0000000000000001', session_id: mine, tenant: 'default' }, 60);
  const call = (method: string, path: string, body?: string, tok: string | null = token) =>
    fetch(`${s.url}/internal/transfer/files${path}`, {
      method,
      headers: tok === null ? {} : { 'x-sandgate-transfer': tok },
      ...(body === undefined ? {} : { body }),
    });

  assert.equal((await call('GET', '', undefined, null)).status, 401, 'no token');
  assert.equal((await call('GET', '', undefined, 'forged')).status, 401, 'a token never granted');
  assert.equal((await call('PUT', '/made.txt', 'from the pod')).status, 201);
  assert.deepEqual(
    (await (await call('GET', '')).json()).files.map((f: any) => f.path),
    ['made.txt'],
  );
  assert.equal(await (await call('GET', '/made.txt')).text(), 'from the pod');
  assert.equal((await call('GET', '/secret.txt')).status, 404, "another session's file is not there for this token");
  assert.equal((await call('PUT', '/..%2Fescape.txt', 'x')).status, 400, "paths are checked as a client's");
  assert.equal((await call('DELETE', '/made.txt')).status, 204);

  assert.equal((await s.api('DELETE', `/v1/sessions/${mine}`)).status, 204);
  assert.equal((await call('PUT', '/late.txt', 'after the end')).status, 404, 'the session is gone');
  await assert.rejects(stat(s.deps.workspaces.dir(mine)), { code: 'ENOENT' }, 'nothing brought it back');

  await grants.revoke(token);
  assert.equal((await call('GET', '')).status, 401, 'a revoked token');
});
