import { test } from 'node:test';
import { MCP_TOOLS } from '@sandgate/contracts';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';
import { b64, initializeMessage, mcpClient, rawMcp, toolsOf } from './mcp-client.ts';

const KEY_A = 'tenant-a-key-0123456789';
const KEY_B = 'tenant-b-key-0123456789';
const auth = (key: string) => ({ authorization: `Bearer ${key}` });
const env = { SANDGATE_API_KEYS: `${KEY_A}:tenantA,${KEY_B}:tenantB` };

test('MCP over HTTP: API keys, Origin, stateless GET/DELETE, the session id header', async (t) => {
  const s = await startStack({ worker: false, apiKey: KEY_A, env });
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

  await t.test("an Origin other than the public URL's is 403; the public URL's own passes", async () => {
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

  await t.test('initialize answers with an Mcp-Session-Id the SDK client keeps; requests work without it', async () => {
    const r = await rawMcp(s.url, initializeMessage(), auth(KEY_A));
    assert.match(r.headers.get('mcp-session-id') ?? '', /^mcp_[0-9a-f]{32}$/);
    const { client, transport } = await mcpClient(s, { apiKey: KEY_A });
    t.after(() => client.close());
    assert.match(transport.sessionId ?? '', /^mcp_[0-9a-f]{32}$/);
    // Stateless: a request that never initialized is served all the same, by whichever replica gets it.
    const list = await rawMcp(s.url, { jsonrpc: '2.0', id: 7, method: 'tools/list' }, auth(KEY_A));
    assert.equal(list.status, 200);
    assert.equal(list.messages[0]!.id, 7);
    assert.equal(list.messages[0]!.result.tools.length, MCP_TOOLS.length);
  });

  await t.test('GET and DELETE /mcp are 405 (no stream, no session to end), as the SDK client expects', async () => {
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
    assert.deepEqual(
      Object.keys(doc.paths).filter((p) => p.startsWith('/mcp')),
      [],
    );
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

test("MCP tenants: tenant B can neither see nor use tenant A's session", async (t) => {
  const s = await startStack({ apiKey: KEY_A, env });
  t.after(() => s.close());
  const clientA = (await mcpClient(s, { apiKey: KEY_A })).client;
  const clientB = (await mcpClient(s, { apiKey: KEY_B })).client;
  t.after(() => Promise.all([clientA.close(), clientB.close()]));
  const [a, b] = [toolsOf(clientA), toolsOf(clientB)];

  const upload = await a.ok('upload_file', { filename: 'secret.txt', content_base64: b64('A only') });
  const session = upload.session_id as string;
  const attempts: [string, Record<string, unknown>][] = [
    ['list_artifacts', {}],
    ['read_artifact', { path: 'secret.txt' }],
    ['run_python', { code: "print(open('secret.txt').read())" }],
    ['run_code', { language: 'bash', code: 'cat secret.txt' }],
    ['upload_file', { filename: 'secret.txt', content_base64: '', overwrite: true }],
    ['close_session', {}],
  ];
  for (const [name, args] of attempts) {
    const e = await b.fail(name, { session_id: session, ...args });
    assert.equal(e.error, 'session_not_found', name);
    assert.equal(e.message, `No active session with id ${session}`, 'worded as for a session that does not exist');
  }
  assert.equal((await s.api('GET', `/v1/sessions/${session}`, undefined, auth(KEY_B))).status, 404);

  const read = await a.ok('read_artifact', { session_id: session, path: 'secret.txt' });
  assert.equal(Buffer.from(read.content_base64, 'base64').toString(), 'A only', "A's file and session are intact");
  const own = await b.ok('run_python', { code: 'import os; print(sorted(os.listdir(".")))' });
  assert.equal(own.stdout, '[]\n', "B's own session starts empty");
  assert.notEqual(own.session_id, session);
});
