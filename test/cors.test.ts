import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';
import { initializeMessage, rawMcp } from './mcp-client.ts';
import { noopBackend } from './noop-backend.ts';

const KEY = 'cors-tenant-key-0123456789';
const APP = 'https://app.example.com';

/** What a browser sends before a cross-origin request with a key and a JSON body. */
const preflight = (url: string, origin: string, method = 'POST') =>
  fetch(url, {
    method: 'OPTIONS',
    headers: {
      origin,
      'access-control-request-method': method,
      'access-control-request-headers': 'authorization,content-type',
    },
  });

test('CORS: origins in SANDGATE_CORS_ORIGINS may call the API from a browser; others get no CORS headers', async (t) => {
  const s = await startStack({
    worker: noopBackend,
    apiKey: KEY,
    env: { SANDGATE_API_KEYS: `${KEY}:tenantA`, SANDGATE_CORS_ORIGINS: APP },
  });
  t.after(() => s.close());

  await t.test('a preflight needs no key: 204 with what the browser asked for', async () => {
    const r = await preflight(`${s.url}/v1/executions`, APP);
    assert.equal(r.status, 204, await r.clone().text());
    assert.equal(r.headers.get('access-control-allow-origin'), APP);
    assert.match(r.headers.get('access-control-allow-methods') ?? '', /POST/);
    assert.match(r.headers.get('access-control-allow-headers') ?? '', /authorization/i);
    assert.match(r.headers.get('vary') ?? '', /origin/i);
  });

  await t.test("a foreign origin's preflight is answered without CORS headers (the browser then refuses)", async () => {
    const r = await preflight(`${s.url}/v1/executions`, 'https://evil.example');
    assert.notEqual(r.status, 401);
    assert.equal(r.headers.get('access-control-allow-origin'), null);
  });

  await t.test('requests, SSE and /mcp answer with the origin and expose the headers clients read', async () => {
    const origin = { origin: APP };
    const run = await s.api('POST', '/v1/executions?wait=30', { language: 'python', code: 'print(1)' }, origin);
    assert.equal(run.status, 200);
    assert.equal(run.headers.get('access-control-allow-origin'), APP);
    const exposed = run.headers.get('access-control-expose-headers') ?? '';
    for (const h of ['location', 'retry-after', 'x-request-id', 'content-disposition', 'mcp-session-id']) {
      assert.match(exposed, new RegExp(h, 'i'), h);
    }
    const events = await fetch(run.body.links.events, { headers: { authorization: `Bearer ${KEY}`, ...origin } });
    assert.equal(events.status, 200);
    assert.equal(events.headers.get('access-control-allow-origin'), APP, 'on the hijacked SSE response too');
    await events.text();
    const mcp = await rawMcp(s.url, initializeMessage(), { authorization: `Bearer ${KEY}`, ...origin });
    assert.equal(mcp.status, 200, 'the MCP Origin check allows what CORS allows');
    assert.equal(mcp.headers.get('access-control-allow-origin'), APP);
  });
});

test('CORS in open mode: a listed origin passes the DNS-rebinding origin check too', async (t) => {
  const origin = 'http://dashboard.test:3000';
  const s = await startStack({ worker: false, env: { SANDGATE_CORS_ORIGINS: origin } });
  t.after(() => s.close());
  const ok = await s.api('GET', '/v1/sessions', undefined, { origin });
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  assert.equal(ok.headers.get('access-control-allow-origin'), origin);
  const mcp = await rawMcp(s.url, initializeMessage(), { origin });
  assert.equal(mcp.status, 200);
  const foreign = await s.api('GET', '/v1/sessions', undefined, { origin: 'http://evil.test:3000' });
  assert.equal(foreign.status, 403);
  assert.equal(foreign.body.code, 'origin_not_allowed');
});
