import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SpecCheck, type Exchange } from './spec-check.ts';

const check = new SpecCheck();
const problem = (status: number, code: string, extra = {}) =>
  JSON.stringify({ type: 'about:blank', title: 't', status, code, detail: 'd', ...extra });
const session = {
  id: 'sess_0123456789ab',
  mode: 'process',
  state: 'idle',
  created_at: '2026-01-01T00:00:00.000Z',
  last_used_at: '2026-01-01T00:00:00.000Z',
  expires_at: '2026-01-01T00:30:00.000Z',
  ttl_seconds: 1800,
  current_execution_id: null,
  metadata: {},
  network: 'none',
  private: false,
  volumes: [],
  template: null,
  paused_at: null,
  pauses_at: '2026-01-01T00:05:00.000Z',
  idle_pause_seconds: 300,
  undo: 'files',
  forked_from: null,
};
const x = (over: Partial<Exchange>): Exchange => ({
  method: 'GET',
  url: '/v1/sessions/sess_0123456789ab',
  headers: {},
  body: undefined,
  status: 200,
  contentType: 'application/json; charset=utf-8',
  payload: JSON.stringify(session),
  ...over,
});

test('the spec check passes what the document says and flags each kind of mismatch', async () => {
  assert.deepEqual(await check.check(x({})), []);
  assert.deepEqual(
    await check.check(
      x({ status: 404, contentType: 'application/problem+json', payload: problem(404, 'session_not_found') }),
    ),
    [],
  );
  const [undocumented] = await check.check(x({ status: 418 }));
  assert.match(undocumented!, /status not documented/);
  const [wrongType] = await check.check(
    x({ status: 404, contentType: 'application/json', payload: problem(404, 'x') }),
  );
  assert.match(wrongType!, /application\/json is not among application\/problem\+json/);
  const [badBody] = await check.check(x({ payload: JSON.stringify({ ...session, mode: 'weird' }) }));
  assert.match(badBody!, /body does not match the schema/);
  const [looser] = await check.check(
    x({
      method: 'POST',
      url: '/v1/sessions',
      headers: { 'content-type': 'application/json' },
      body: { mode: 'weird' },
      status: 201,
    }),
  );
  assert.match(looser!, /accepted a request the document forbids/);
  const [stricter] = await check.check(
    x({
      method: 'POST',
      url: '/v1/sessions',
      headers: { 'content-type': 'application/json' },
      body: { mode: 'stateful' },
      status: 400,
      contentType: 'application/problem+json',
      payload: problem(400, 'validation_failed', { errors: [] }),
    }),
  );
  assert.match(stricter!, /allows a request the server's schema refused/);
  assert.deepEqual(
    await check.check(x({ url: '/mcp', method: 'POST', status: 200 })),
    [],
    'MCP is not in the document',
  );
});
