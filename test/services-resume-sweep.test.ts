import { test } from 'node:test';
import assert from 'node:assert/strict';
import { retainServices } from '@sandgate/backends/services';
import { startStack, until } from './harness.ts';

const KEY = 'sweep-race-key-0123456789abcd';

test("a sweep that read the sessions before a resume leaves the resumed session's services working", async (t) => {
  const s = await startStack({ env: { SANDGATE_API_KEYS: `${KEY}:acme` }, apiKey: KEY });
  t.after(() => s.close());
  const id = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const first = await s.api('POST', '/v1/executions?wait=60', { session_id: id, language: 'python', code: '1' });
  assert.equal(first.body.result?.state, 'completed', JSON.stringify(first.body));
  assert.equal((await s.api('POST', `/v1/sessions/${id}/pause`)).status, 200);

  // Housekeeping reads the live sessions: this one is paused, so it is not among them.
  const readAt = Date.now();
  const live = await s.deps.sessions.liveIds();
  assert.equal(live.has(id), false);
  // Meanwhile the session is resumed (on any worker): a new sandbox, with its services state made afresh.
  const resumed = await s.api('POST', `/v1/sessions/${id}/resume`);
  assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
  // Then that housekeeping's sweep gets to the services state, with the view it read before the resume.
  await retainServices(s.config.dataDir, live, readAt);

  const started = await s.api('POST', `/v1/sessions/${id}/services`, {
    name: 'web',
    command: 'exec python3 -m http.server 8000',
  });
  assert.equal(started.status, 201, JSON.stringify(started.body));
  const svc = await until('the service to listen', async () => {
    const r = await s.api('GET', `/v1/sessions/${id}/services/web`);
    assert.notEqual(r.body.state, 'failed', JSON.stringify(r.body));
    return r.body.port !== null && r.body;
  });
  const page = await fetch(svc.proxy_url, { headers: { authorization: `Bearer ${KEY}` } });
  assert.equal(page.status, 200, await page.clone().text());

  // A session that is really gone loses its services state at the next sweep, read after it went.
  assert.equal((await s.api('DELETE', `/v1/sessions/${id}`)).status, 204);
  await retainServices(s.config.dataDir, await s.deps.sessions.liveIds(), Date.now() + 5_000);
  const after = await s.api('GET', `/v1/sessions/${id}/services/web`);
  assert.equal(after.status, 404);
});
