import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';

test('sessions, validation and errors speak problem+json', async (t) => {
  const s = await startStack({ worker: false, env: { SANDGATE_MAX_SESSIONS: '3' } });
  t.after(() => s.close());

  await t.test('health and docs are served', async () => {
    assert.equal((await s.api('GET', '/healthz')).body.status, 'ok');
    const spec = await s.api('GET', '/openapi.json');
    assert.equal(spec.body.openapi, '3.1.0');
    assert.ok(spec.body.paths['/v1/executions']);
    const docs = await fetch(`${s.url}/docs/`);
    assert.equal(docs.status, 200);
    assert.match(await docs.text(), /swagger/i);
    const ready = await s.api('GET', '/readyz');
    assert.equal(ready.status, 503, 'no worker is running, so not ready');
    assert.equal(ready.body.code, 'not_ready');
  });

  await t.test('create, get, list and delete a session', async () => {
    const created = await s.api('POST', '/v1/sessions', { metadata: { owner: 'test' } });
    assert.equal(created.status, 201);
    assert.match(created.body.id, /^sess_[0-9a-f]{12}$/);
    assert.equal(created.body.state, 'idle');
    assert.deepEqual(created.body.metadata, { owner: 'test' });
    const got = await s.api('GET', `/v1/sessions/${created.body.id}`);
    assert.equal(got.body.id, created.body.id);
    const list = await s.api('GET', '/v1/sessions');
    assert.ok(list.body.sessions.some((x: { id: string }) => x.id === created.body.id));
    assert.equal((await s.api('DELETE', `/v1/sessions/${created.body.id}`)).status, 204);
    const gone = await s.api('GET', `/v1/sessions/${created.body.id}`);
    assert.equal(gone.status, 404);
    assert.equal(gone.body.code, 'session_not_found');
    assert.match(gone.headers.get('content-type') ?? '', /^application\/problem\+json/);
  });

  await t.test('a POST without a body creates a default session', async () => {
    const r = await fetch(`${s.url}/v1/sessions`, { method: 'POST' });
    assert.equal(r.status, 201);
    const body = (await r.json()) as { id: string; mode: string };
    assert.equal(body.mode, 'process');
    await s.api('DELETE', `/v1/sessions/${body.id}`);
  });

  await t.test('an empty body sent as application/json is no body: accepted where the route takes none', async () => {
    const json = { 'content-type': 'application/json' };
    const bare = (method: string, path: string) => fetch(`${s.url}${path}`, { method, headers: json });
    const created = await bare('POST', '/v1/sessions');
    assert.equal(created.status, 201, await created.clone().text());
    const id = ((await created.json()) as { id: string }).id;
    const restarted = await bare('POST', `/v1/sessions/${id}/restart`);
    assert.equal(restarted.status, 200, await restarted.text());
    const upload = await bare('POST', `/v1/sessions/${id}/files`);
    assert.equal(upload.status, 400, 'an upload needs a body');
    assert.equal(((await upload.json()) as { code: string }).code, 'validation_failed');
    const deleted = await bare('DELETE', `/v1/sessions/${id}`);
    assert.equal(deleted.status, 204, await deleted.text());
    const cancel = await bare('POST', '/v1/executions/exec_0000000000000000/cancel');
    assert.equal(cancel.status, 404, 'the route ran: the execution is unknown');
    assert.equal(((await cancel.json()) as { code: string }).code, 'execution_not_found');
    const run = await bare('POST', '/v1/executions');
    assert.equal(run.status, 400);
    assert.equal(
      ((await run.json()) as { code: string }).code,
      'validation_failed',
      'a run needs a body: told so, not "invalid JSON"',
    );
    const blank = await fetch(`${s.url}/v1/sessions`, { method: 'POST', headers: json, body: '  \n' });
    assert.equal(blank.status, 400, 'whitespace is not an empty body');
    assert.equal(((await blank.json()) as { code: string }).code, 'invalid_json');
  });

  await t.test('max_sessions is enforced per tenant', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await s.api('POST', '/v1/sessions', {})).body.id);
    const over = await s.api('POST', '/v1/sessions', {});
    assert.equal(over.status, 429);
    assert.equal(over.body.code, 'max_sessions');
    // Retry-After: until the soonest of them pauses by itself (a paused session counts as no live one), as they were
    // all just made: their idle time.
    const after = Number(over.headers.get('retry-after'));
    const idle = s.config.sessionIdlePauseSeconds;
    assert.ok(after > idle - 60 && after <= idle, String(after));
    assert.equal(over.body.retry_after, after);
    for (const id of ids) await s.api('DELETE', `/v1/sessions/${id}`);
    assert.equal((await s.api('POST', '/v1/sessions', {})).status, 201, 'deleting frees the slots');
  });

  await t.test('bad input gets a clear 4xx, never a 500', async () => {
    const cases: [string, string, unknown, number, string][] = [
      ['malformed JSON', '/v1/executions', '{"language": "python", "code": ', 400, 'invalid_json'],
      ['unknown language', '/v1/executions', { language: 'cobol', code: 'x' }, 400, 'unsupported_language'],
      ['missing code', '/v1/executions', { language: 'python' }, 400, 'validation_failed'],
      ['unknown field', '/v1/executions', { language: 'python', code: '1', bogus: 1 }, 400, 'validation_failed'],
      [
        'code over 100 KB',
        '/v1/executions',
        { language: 'python', code: 'x'.repeat(100_001) },
        413,
        'payload_too_large',
      ],
      [
        'unknown session',
        '/v1/executions',
        { language: 'python', code: '1', session_id: 'sess_000000000000' },
        404,
        'session_not_found',
      ],
      [
        'malformed session id',
        '/v1/executions',
        { language: 'python', code: '1', session_id: '../etc' },
        400,
        'validation_failed',
      ],
      [
        'timeout over the max',
        '/v1/executions',
        { language: 'python', code: '1', timeout_ms: 10_000_000 },
        400,
        'validation_failed',
      ],
      [
        'bad env name',
        '/v1/executions',
        { language: 'python', code: '1', env: { 'A-B': 'x' } },
        400,
        'validation_failed',
      ],
    ];
    for (const [name, path, body, status, code] of cases) {
      const r = await s.api('POST', path, body);
      assert.equal(r.status, status, `${name}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, code, name);
      assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/, name);
      assert.ok(r.body.detail.length > 0, name);
    }
    const notFound = await s.api('GET', '/v1/nope');
    assert.equal(notFound.status, 404);
    assert.equal(notFound.body.code, 'not_found');
    const unknownExec = await s.api('GET', '/v1/executions/exec_0000000000000000');
    assert.equal(unknownExec.body.code, 'execution_not_found');
  });
});

test('API keys map to tenants and refuse everything else', async (t) => {
  const keyA = 'a'.repeat(32);
  const keyB = 'b'.repeat(32);
  const s = await startStack({ worker: false, env: { SANDGATE_API_KEYS: `${keyA}:tenantA,${keyB}:tenantB` } });
  t.after(() => s.close());
  const as = (key: string | null): Record<string, string> => (key ? { authorization: `Bearer ${key}` } : {});

  const none = await s.api('GET', '/v1/sessions', undefined, as(null));
  assert.equal(none.status, 401);
  assert.equal(none.body.code, 'unauthorized');
  assert.match(none.headers.get('www-authenticate') ?? '', /^Bearer/);
  assert.equal((await s.api('GET', '/v1/sessions', undefined, as('c'.repeat(32)))).status, 401);
  assert.equal((await s.api('GET', '/healthz', undefined, as(null))).status, 200, 'health needs no key');

  const sa = (await s.api('POST', '/v1/sessions', {}, as(keyA))).body.id as string;
  assert.equal((await s.api('GET', `/v1/sessions/${sa}`, undefined, as(keyA))).status, 200);
  const fromB = await s.api('GET', `/v1/sessions/${sa}`, undefined, as(keyB));
  assert.equal(fromB.status, 404, 'another tenant sees nothing');
  assert.equal(fromB.body.code, 'session_not_found');
  const listB = await s.api('GET', '/v1/sessions', undefined, as(keyB));
  assert.deepEqual(listB.body.sessions, []);
  assert.equal((await s.api('DELETE', `/v1/sessions/${sa}`, undefined, as(keyB))).status, 404);
  assert.equal((await s.api('GET', `/v1/sessions/${sa}`, undefined, as(keyA))).status, 200, "B's delete did nothing");
});

test('without API keys the gateway refuses to listen beyond loopback', async () => {
  const { startGateway } = await import('@sandgate/gateway');
  const { loadConfig } = await import('@sandgate/config');
  const { pino } = await import('pino');
  const config = loadConfig({ SANDGATE_HOST: '0.0.0.0', SANDGATE_PORT: '0', SANDGATE_LOG_LEVEL: 'silent' });
  await assert.rejects(
    startGateway(config, pino({ level: 'silent' })),
    /refusing to listen on 0\.0\.0\.0 \(it resolves to 0\.0\.0\.0\) without authentication: set SANDGATE_API_KEYS/,
  );
});
