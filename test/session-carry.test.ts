import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import { startStack, until, type Stack } from './harness.ts';

// A paused session comes back as it was made: its template (image and env) and its volumes, on resume and in a fork.
const KEY = 'carry-test-key-0123456789abcd';
const OPERATOR = 'carry-operator-key-0123456789';
const as = (key: string) => ({ authorization: `Bearer ${key}` });

async function run(s: Stack, session: string, code: string) {
  const r = await s.api('POST', '/v1/executions?wait=120', { session_id: session, language: 'bash', code });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.result.state, 'completed', JSON.stringify(r.body.result));
  return r.body.result;
}

test('template and volumes are kept across pause, resume and fork', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-carry-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'templates.yaml');
  await writeFile(file, 'templates:\n  - name: greet\n    env: { GREETING: hello-from-greet }\n');
  const s = await startStack({
    env: { SANDGATE_API_KEYS: `${KEY}:acme`, SANDGATE_OPERATOR_KEYS: OPERATOR, SANDGATE_TEMPLATES: file },
    apiKey: KEY,
  });
  t.after(async () => {
    await s.close();
    const docker = new Dockerode();
    const label = [`org.sandgate.deployment=${s.config.redisPrefix}`];
    for (const img of await docker.listImages({ filters: { label } })) {
      await docker.getImage(img.Id).remove({ force: true });
    }
  });
  await until(
    'the template to be built',
    async () => (await s.api('GET', '/v1/templates/greet', undefined, as(OPERATOR))).body.state === 'ready',
    120_000,
    250,
  );
  assert.equal((await s.api('POST', '/v1/volumes', { name: 'shared', size_bytes: 4 << 20 })).status, 201);
  const made = await s.api('POST', '/v1/sessions', {
    template: 'greet',
    volumes: [{ name: 'shared', path: '/mnt/volumes/shared' }],
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const id = made.body.id as string;
  assert.equal(
    (await run(s, id, 'echo "$GREETING" && echo v > /mnt/volumes/shared/v.txt && cat /mnt/volumes/shared/v.txt'))
      .stdout,
    'hello-from-greet\nv\n',
  );

  await t.test('POST …/resume: the template and the volume are back', async () => {
    assert.equal((await s.api('POST', `/v1/sessions/${id}/pause`)).status, 200);
    const resumed = await s.api('POST', `/v1/sessions/${id}/resume`);
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.session.template, 'greet');
    const r = await run(s, id, 'echo "$GREETING"; cat /mnt/volumes/shared/v.txt; echo w >> /mnt/volumes/shared/v.txt');
    assert.equal(r.stdout, 'hello-from-greet\nv\n');
  });

  await t.test('a run on a paused session: the template and the volume are back', async () => {
    assert.equal((await s.api('POST', `/v1/sessions/${id}/pause`)).status, 200);
    const r = await run(s, id, 'echo "$GREETING"; cat /mnt/volumes/shared/v.txt');
    assert.ok(r.resumed);
    assert.equal(r.stdout, 'hello-from-greet\nv\nw\n');
  });

  await t.test('a fork keeps the template', async () => {
    const plain = (await s.api('POST', '/v1/sessions', { template: 'greet' })).body.id as string;
    const fork = await s.api('POST', `/v1/sessions/${plain}/fork`, {});
    assert.equal(fork.status, 201, JSON.stringify(fork.body));
    const copy = fork.body.sessions[0];
    assert.equal(copy.template, 'greet');
    assert.equal((await run(s, copy.id, 'echo "$GREETING"')).stdout, 'hello-from-greet\n');
  });
});
