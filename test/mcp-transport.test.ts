import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';
import { initializeMessage, mcpClient, rawMcp, structured } from './mcp-client.ts';

const KEY_A = 'tenant-a-key-0123456789';
const KEY_B = 'tenant-b-key-0123456789';
const auth = (key: string) => ({ authorization: `Bearer ${key}` });

test('MCP over HTTP: API keys, Origin, stateless GET/DELETE, the session id header', async (t) => {
  const s = await startStack({ worker: false, apiKey: KEY_A, env: { SANDGATE_API_KEYS: `${KEY_A}:tenantA,${KEY_B}:tenantB` } });
  t.after(() => s.close());

  await t.test('no key or a wrong key is 401 with a Bearer challenge', async () => {
    for (const headers of [{}, auth('not-a-valid-key-at-all')]) {
      const r = await rawMcp(s.url, initializeMessage(), headers);
      assert.equal(r.status, 401);
      assert.equal((r.body as { code: string }).code, 'unauthorized');
      assert.match(r.headers.get('www-authenticate') ?? '', /^Bearer/);
    }
    await assert.rejects(mcpClient(s), /401|Unauthorized/i, 'the SDK client cannot connect without a key');
  });

  await t.test('an Origin other than the public URL\'s is 403; the public URL\'s own passes', async () => {
    for (const origin of ['http://evil.example', 'null', 'http://localhost:3000', `${s.url}.evil.example`]) {
      const r = await rawMcp(s.url, initializeMessage(), { ...auth(KEY_A), origin });
      assert.equal(r.status, 403, origin);
      assert.equal((r.body as { code: string }).code, 'forbidden');
    }
    const ok = await rawMcp(s.url, initializeMessage(), { ...auth(KEY_A), origin: s.url });
    assert.equal(ok.status, 200);
    assert.equal(ok.messages[0]!.result.serverInfo.name, 'sandgate');
    await assert.rejects(mcpClient(s, { apiKey: KEY_A, headers: { origin: 'http://evil.example' } }), /403|forbidden/i);
  });

  await t.test('initialize answers with an Mcp-Session-Id the SDK client then sends; tools work without it too', async () => {
    const r = await rawMcp(s.url, initializeMessage(), auth(KEY_A));
    assert.match(r.headers.get('mcp-session-id') ?? '', /^mcp_[0-9a-f]{32}$/);
    const { client, transport } = await mcpClient(s, { apiKey: KEY_A });
    t.after(() => client.close());
    assert.match(transport.sessionId ?? '', /^mcp_[0-9a-f]{32}$/);
    // Stateless: a request that never initialized is served all the same, by whichever replica gets it.
    const list = await rawMcp(s.url, { jsonrpc: '2.0', id: 7, method: 'tools/list' }, auth(KEY_A));
    assert.equal(list.status, 200);
    assert.equal(list.messages[0]!.id, 7);
    assert.equal(list.messages[0]!.result.tools.length, 7);
  });

  await t.test('GET and DELETE /mcp are 405 (no standalone stream, no session to end); the SDK client accepts that', async () => {
    for (const method of ['GET', 'DELETE']) {
      const r = await fetch(`${s.url}/mcp`, { method, headers: { ...auth(KEY_A), accept: 'text/event-stream' } });
      assert.equal(r.status, 405, method);
      assert.equal(r.headers.get('allow'), 'POST');
      assert.equal(((await r.json()) as { code: string }).code, 'method_not_allowed');
    }
    const { client, transport } = await mcpClient(s, { apiKey: KEY_A });
    await transport.terminateSession();
    await client.close();
  });

  await t.test('a POST that does not accept an SSE reply is 406', async () => {
    const r = await rawMcp(s.url, initializeMessage(), { ...auth(KEY_A), accept: 'application/json' });
    assert.equal(r.status, 406);
  });

  await t.test('/mcp is not in the OpenAPI document', async () => {
    const doc = (await s.api('GET', '/openapi.json')).body as { paths: Record<string, unknown> };
    assert.ok(doc.paths['/v1/executions']);
    assert.deepEqual(Object.keys(doc.paths).filter((p) => p.startsWith('/mcp')), []);
  });
});

test('MCP in open mode allows loopback origins, but not others', async (t) => {
  const s = await startStack({ worker: false });
  t.after(() => s.close());
  for (const origin of ['http://localhost:5173', 'http://127.0.0.1:6274', 'http://[::1]:8080']) {
    assert.equal((await rawMcp(s.url, initializeMessage(), { origin })).status, 200, origin);
  }
  assert.equal((await rawMcp(s.url, initializeMessage(), { origin: 'http://example.com' })).status, 403);
});

test('MCP tenants: tenant B can neither see nor use tenant A\'s session', async (t) => {
  const s = await startStack({ apiKey: KEY_A, env: { SANDGATE_API_KEYS: `${KEY_A}:tenantA,${KEY_B}:tenantB` } });
  t.after(() => s.close());
  const a = (await mcpClient(s, { apiKey: KEY_A })).client;
  const b = (await mcpClient(s, { apiKey: KEY_B })).client;
  t.after(() => Promise.all([a.close(), b.close()]));

  const up = structured(await a.callTool({ name: 'upload_file', arguments: { filename: 'secret.txt', content_base64: Buffer.from('A only').toString('base64') } }));
  const session = up.session_id as string;
  const attempts: [string, Record<string, unknown>][] = [
    ['list_artifacts', {}], ['read_artifact', { path: 'secret.txt' }], ['run_python', { code: "print(open('secret.txt').read())" }],
    ['run_code', { language: 'bash', code: 'cat secret.txt' }], ['upload_file', { filename: 'secret.txt', content_base64: '', overwrite: true }],
    ['close_session', {}],
  ];
  for (const [name, args] of attempts) {
    const r = await b.callTool({ name, arguments: { session_id: session, ...args } });
    assert.equal(r.isError, true, name);
    assert.equal(structured(r).error, 'session_not_found', name);
    assert.equal(structured(r).message, `No active session with id ${session}`, 'worded exactly as for a session that does not exist');
  }
  assert.equal((await s.api('GET', `/v1/sessions/${session}`, undefined, auth(KEY_B))).status, 404);

  const read = structured(await a.callTool({ name: 'read_artifact', arguments: { session_id: session, path: 'secret.txt' } }));
  assert.equal(Buffer.from(read.content_base64, 'base64').toString(), 'A only', 'A\'s file is untouched and A\'s session alive');
  const own = structured(await b.callTool({ name: 'run_python', arguments: { code: 'import os; print(sorted(os.listdir(".")))' } }));
  assert.equal(own.stdout, '[]\n', 'B\'s own session starts empty');
  assert.notEqual(own.session_id, session);
});
