import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './harness.ts';
import { noopBackend } from './noop-backend.ts';

test('one-shots never lock a tenant out: they do not count as live sessions, and their files stay downloadable', async (t) => {
  const s = await startStack({ worker: noopBackend, env: { SANDGATE_MAX_SESSIONS: '3' } });
  t.after(() => s.close());
  const oneShot = (i: number) =>
    s.api('POST', '/v1/executions?wait=30', {
      language: 'python',
      code: 'print(1)',
      files: [{ path: `in-${i}.txt`, content_base64: Buffer.from(`one-shot ${i}`).toString('base64') }],
    });

  const runs = [];
  for (let i = 0; i < 8; i++) {
    const r = await oneShot(i);
    assert.equal(r.status, 200, `one-shot ${i}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.state, 'completed');
    runs.push(r.body);
  }
  assert.equal((await s.api('GET', '/v1/sessions')).body.sessions.length, 0, 'one-shots are not live sessions');
  const sessions: string[] = [];
  for (let i = 0; i < 3; i++) {
    const created = await s.api('POST', '/v1/sessions', {});
    assert.equal(created.status, 201, `session ${i} after 8 one-shots: ${JSON.stringify(created.body)}`);
    sessions.push(created.body.id);
  }
  const over = await s.api('POST', '/v1/sessions', {});
  assert.equal(over.status, 429, 'the limit still holds for real sessions');
  assert.equal(over.body.code, 'max_sessions');
  assert.equal((await oneShot(99)).status, 200, 'a tenant at its session limit still runs one-shots');

  const first = runs[0];
  const download = await fetch(`${s.url}/files/${first.session_id}/in-0.txt`);
  assert.equal(download.status, 200, 'a finished one-shot keeps its files');
  assert.equal(await download.text(), 'one-shot 0');
  assert.equal((await s.api('GET', `/v1/sessions/${first.session_id}/files`)).body.files[0].path, 'in-0.txt');

  // Running again in a one-shot's session makes it a session like any other: it then counts, within the limit.
  const reuse = (id: string) =>
    s.api('POST', '/v1/executions?wait=30', { language: 'python', code: 'print(2)', session_id: id });
  const refused = await reuse(first.session_id);
  assert.equal(refused.status, 429, 'reusing a one-shot session at the limit is refused like creating one');
  assert.equal(refused.body.code, 'max_sessions');
  const after = Number(refused.headers.get('retry-after'));
  // Until the soonest live session pauses by itself (its idle time: they were all just used).
  const idle = s.config.sessionIdlePauseSeconds;
  assert.ok(after > idle - 60 && after <= idle, `Retry-After ${after}`);
  assert.equal((await s.api('DELETE', `/v1/sessions/${sessions[0]}`)).status, 204);
  const reused = await reuse(first.session_id);
  assert.equal(reused.status, 200, JSON.stringify(reused.body));
  const listed = (await s.api('GET', '/v1/sessions')).body.sessions.map((x: { id: string }) => x.id);
  assert.ok(listed.includes(first.session_id), 'the reused session is now a live session');
  assert.equal((await s.api('POST', '/v1/sessions', {})).status, 429, 'and it counts');
});
