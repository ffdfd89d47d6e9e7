import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, until, type Stack } from './harness.ts';

const KEY = 'idle-test-key-0123456789abcde';
const BRIEF = 'idle-brief-key-0123456789abcd';
const as = (key: string) => ({ authorization: `Bearer ${key}` });

async function run(s: Stack, session: string, code: string, key = KEY) {
  const r = await s.api('POST', '/v1/executions?wait=120', { session_id: session, language: 'python', code }, as(key));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.result.state, 'completed', r.body.result.stderr);
  return r.body.result;
}

const stateOf = async (s: Stack, id: string, key = KEY) => await s.api('GET', `/v1/sessions/${id}`, undefined, as(key));

test('sessions left idle pause by themselves, and go after their retention', { concurrency: 2 }, async (t) => {
  const s = await startStack({
    env: {
      SANDGATE_API_KEYS: `${KEY}:acme,${BRIEF}:brief`,
      SANDGATE_SESSION_IDLE_PAUSE_S: '2',
      // The tenant `brief` keeps unused sessions 15 s (long enough for its first run to start on a loaded machine);
      // acme the default (7 days).
      SANDGATE_TENANT_LIMITS: JSON.stringify({ brief: { session_retention_s: 15 } }),
    },
    apiKey: KEY,
  });
  t.after(() => s.close());

  const idle = t.test(
    'idle past SANDGATE_SESSION_IDLE_PAUSE_S: paused, no sandbox, files kept; a run brings it back',
    async () => {
      const id = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
      await run(s, id, "open('kept.txt','w').write('k')\nvalue = 7");
      const paused = await until('the session to pause by itself', async () => {
        const r = await stateOf(s, id);
        return r.body.state === 'paused' ? r.body : null;
      });
      assert.ok(paused.paused_at);
      assert.equal(paused.pauses_at, null);
      assert.equal(await s.sessionSandbox(id), undefined, 'no sandbox is left');
      const back = await run(s, id, "print(value, open('kept.txt').read())");
      assert.equal(back.stdout, '7 k\n');
      assert.ok(back.resumed, 'the run says it resumed the session');
    },
  );

  const retention = t.test(
    'retention per tenant: its unused sessions are deleted with their files and sandbox; others stay',
    async () => {
      // It never pauses here (the retention is what is looked at): a run meeting its idle pause would get session_busy.
      const brief = (await s.api('POST', '/v1/sessions', { idle_pause_seconds: 3600 }, as(BRIEF))).body;
      assert.equal(brief.ttl_seconds, 15);
      const kept = (await s.api('POST', '/v1/sessions', {})).body;
      assert.equal(kept.ttl_seconds, 7 * 86_400);
      await run(s, brief.id, "open('x.txt','w').write('x')", BRIEF);
      await until(
        "the brief tenant's session to be deleted",
        async () => (await stateOf(s, brief.id, BRIEF)).status === 404,
        60_000,
      );
      const files = await s.api('GET', `/v1/sessions/${brief.id}/files`, undefined, as(BRIEF));
      assert.equal(files.status, 404);
      assert.equal(files.body.code, 'session_not_found');
      await until('its sandbox to be removed', async () => (await s.sessionSandbox(brief.id)) === undefined);
      assert.equal((await stateOf(s, kept.id)).status, 200, "acme's session is kept");
    },
  );
  await Promise.all([idle, retention]);
});

test('paused sessions hold no live slot, and their saved variables count against storage', async (t) => {
  const s = await startStack({
    env: { SANDGATE_API_KEYS: `${KEY}:acme`, SANDGATE_MAX_SESSIONS: '1', SANDGATE_TENANT_STORAGE_BYTES: '5MB' },
    apiKey: KEY,
  });
  t.after(() => s.close());

  await t.test('SANDGATE_MAX_SESSIONS counts live sessions only', async () => {
    const a = (await s.api('POST', '/v1/sessions')).body.id as string;
    const refused = await s.api('POST', '/v1/sessions');
    assert.equal(refused.status, 429, JSON.stringify(refused.body));
    assert.equal(refused.body.code, 'max_sessions');
    assert.equal((await s.api('POST', `/v1/sessions/${a}/pause`)).status, 200);
    const b = await s.api('POST', '/v1/sessions');
    assert.equal(b.status, 201, 'a paused session holds no slot');
    const resume = await s.api('POST', `/v1/sessions/${a}/resume`);
    assert.equal(resume.status, 429, JSON.stringify(resume.body));
    assert.equal(resume.body.code, 'max_sessions');
    assert.equal((await stateOf(s, a)).body.state, 'paused', 'it stays paused');
    assert.equal((await s.api('DELETE', `/v1/sessions/${b.body.id}`)).status, 204);
    assert.equal((await s.api('POST', `/v1/sessions/${a}/resume`)).status, 200);
    assert.equal((await s.api('DELETE', `/v1/sessions/${a}`)).status, 204);
  });

  await t.test('saved variables count against the storage quota; what cannot be saved is named', async () => {
    const id = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
    await run(s, id, 'import threading, os\nblob = os.urandom(3_500_000)\nth = threading.Thread(target=print)');
    const before = await s.deps.ledger.total('acme');
    const paused = await s.api('POST', `/v1/sessions/${id}/pause`);
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    assert.deepEqual(paused.body.variables.unsaved, [{ name: 'th', reason: 'a thread' }]);
    assert.ok(paused.body.variables.size_bytes > 3_500_000);
    assert.ok((await s.deps.ledger.total('acme')) >= before + paused.body.variables.size_bytes);
    // Copies of it count too: one fits under the tenant's 5 MB, and then there is no room for another.
    const fork = await s.api('POST', `/v1/sessions/${id}/fork`, {});
    assert.equal(fork.status, 201, JSON.stringify(fork.body));
    assert.ok((await s.deps.ledger.total('acme')) >= before + 2 * paused.body.variables.size_bytes);
    const second = await s.api('POST', `/v1/sessions/${id}/fork`, {});
    assert.equal(second.status, 413, JSON.stringify(second.body));
    assert.equal(second.body.code, 'storage_quota_exceeded');
    assert.equal((await s.api('DELETE', `/v1/sessions/${fork.body.sessions[0].id}`)).status, 204);
    const back = await s.api('POST', '/v1/executions?wait=60', {
      session_id: id,
      language: 'python',
      code: 'len(blob)',
    });
    assert.equal(back.body.result?.value, '3500000', JSON.stringify(back.body));
    assert.deepEqual(back.body.result.resumed.variables.unsaved, [{ name: 'th', reason: 'a thread' }]);
    assert.ok((await s.deps.ledger.total('acme')) < before + 1_000_000, 'loaded: the saved copy no longer counts');
  });
});
