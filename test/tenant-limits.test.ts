import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import type { EventSink, ExecutionBackend } from '@sandgate/backends';
import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import { buildApp, createGatewayDeps } from '@sandgate/gateway';
import { startStack, until } from './harness.ts';
import { mcpClient, toolsOf } from './mcp-client.ts';
import { noopBackend } from './noop-backend.ts';

const keyA = 'a'.repeat(32);
const keyB = 'b'.repeat(32);
const KEYS = `${keyA}:tenantA,${keyB}:tenantB`;
const as = (key: string) => ({ authorization: `Bearer ${key}` });
const run = { language: 'python', code: 'print(1)' };

function assertTooMany(r: { status: number; body: any; headers: Headers }, code: string, what: string) {
  assert.equal(r.status, 429, `${what}: ${JSON.stringify(r.body)}`);
  assert.equal(r.body.code, code, what);
  assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
  const after = Number(r.headers.get('retry-after'));
  assert.ok(after >= 1 && after <= 60, `${what}: Retry-After ${r.headers.get('retry-after')}`);
  assert.equal(r.body.retry_after, after);
}

test('requests per minute are counted per tenant in Redis, the same by every gateway replica', async (t) => {
  const s = await startStack({
    worker: false,
    env: {
      SANDGATE_API_KEYS: KEYS,
      SANDGATE_RATE_LIMIT_PER_MIN: '10',
      SANDGATE_TENANT_LIMITS: '{"tenantB":{"requests_per_min":0}}',
    },
  });
  t.after(() => s.close());
  const deps = await createGatewayDeps(s.config, pino({ level: 'silent' }));
  const second = await buildApp(deps);
  const url2 = await second.listen({ host: '127.0.0.1', port: 0 });
  t.after(async () => {
    await second.close();
    await deps.close();
  });

  for (let i = 0; i < 10; i++) {
    const r = await fetch(`${i % 2 ? url2 : s.url}/v1/sessions`, { headers: as(keyA) });
    assert.equal(r.status, 200, `request ${i}`);
    assert.equal(r.headers.get('x-ratelimit-limit'), '10');
    assert.equal(r.headers.get('x-ratelimit-remaining'), String(9 - i));
  }
  assertTooMany(
    await s.api('GET', '/v1/sessions', undefined, as(keyA)),
    'rate_limited',
    'the 11th request, on either replica',
  );
  const onSecond = await fetch(`${url2}/v1/sessions`, { headers: as(keyA) });
  assert.equal(onSecond.status, 429);
  for (let i = 0; i < 15; i++)
    assert.equal((await s.api('GET', '/v1/sessions', undefined, as(keyB))).status, 200, 'tenant B has no limit');
});

test('runs and uploads per minute are quotas of each tenant', async (t) => {
  const s = await startStack({
    worker: noopBackend,
    env: { SANDGATE_API_KEYS: KEYS, SANDGATE_TENANT_RUNS_PER_MIN: '3', SANDGATE_TENANT_UPLOADS_PER_MIN: '2' },
  });
  t.after(() => s.close());
  for (let i = 0; i < 3; i++) assert.equal((await s.api('POST', '/v1/executions?wait=30', run, as(keyA))).status, 200);
  assertTooMany(await s.api('POST', '/v1/executions', run, as(keyA)), 'quota_exceeded', 'the 4th run in a minute');
  assert.equal(
    (await s.api('POST', '/v1/executions?wait=30', run, as(keyB))).status,
    200,
    "another tenant's quota is its own",
  );

  const session = (await s.api('POST', '/v1/sessions', {}, as(keyA))).body.id as string;
  const upload = (i: number) =>
    s.api('PUT', `/v1/sessions/${session}/files/f${i}.txt`, 'x', { ...as(keyA), 'content-type': 'text/plain' });
  assert.equal((await upload(1)).status, 201);
  assert.equal(
    (await s.api('POST', `/v1/sessions/${session}/files`, { path: 'j.txt', content_base64: 'eA==' }, as(keyA))).status,
    201,
  );
  assertTooMany(await upload(3), 'quota_exceeded', 'the 3rd upload in a minute');
  assert.equal(
    (await s.api('GET', `/v1/sessions/${session}/files`, undefined, as(keyA))).status,
    200,
    'reading is no upload',
  );
});

test('a tenant may have max_running + max_queued runs in flight; one more is refused until one ends', async (t) => {
  const s = await startStack({
    worker: false,
    env: { SANDGATE_API_KEYS: KEYS, SANDGATE_TENANT_MAX_RUNNING: '1', SANDGATE_TENANT_MAX_QUEUED: '2' },
  });
  t.after(() => s.close());
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await s.api('POST', '/v1/executions', run, as(keyA));
    assert.equal(r.status, 202);
    ids.push(r.body.id);
  }
  const over = await s.api('POST', '/v1/executions', run, as(keyA));
  assertTooMany(over, 'quota_exceeded', 'a 4th run in flight');
  assert.match(over.body.detail, /3 executions queued or running/);
  assert.equal((await s.api('POST', '/v1/executions', run, as(keyB))).status, 202, 'tenant B is not held back by A');
  await s.api('POST', `/v1/executions/${ids[0]}/cancel`, undefined, as(keyA));
  assert.equal((await s.api('POST', '/v1/executions', run, as(keyA))).status, 202, 'a run ended: room for one more');
});

/** Holds every run until released; counts how many of each tenant run at once. */
function gatedBackend() {
  const now = new Map<string, number>();
  const most = new Map<string, number>();
  const started: string[] = [];
  let open: () => void = () => {};
  const gate = new Promise<void>((r) => {
    open = r;
  });
  const backend: ExecutionBackend = {
    ...noopBackend,
    name: 'gated',
    async execute(job: ExecutionJob, events: EventSink): Promise<ExecutionResult> {
      now.set(job.tenant, (now.get(job.tenant) ?? 0) + 1);
      most.set(job.tenant, Math.max(most.get(job.tenant) ?? 0, now.get(job.tenant)!));
      started.push(job.tenant);
      await gate;
      now.set(job.tenant, now.get(job.tenant)! - 1);
      return noopBackend.execute(job, events, new AbortController().signal);
    },
  };
  return { backend, most, started, release: () => open() };
}

test('a tenant runs at most max_running at once; its other runs wait while other tenants run', async (t) => {
  const gated = gatedBackend();
  const s = await startStack({
    worker: false,
    env: {
      SANDGATE_API_KEYS: KEYS,
      SANDGATE_WORKER_CONCURRENCY: '3',
      SANDGATE_TENANT_LIMITS: '{"tenantA":{"max_running":1}}',
    },
  });
  t.after(() => s.close());
  await s.startWorker(gated.backend);
  const a = [];
  for (let i = 0; i < 3; i++) a.push((await s.api('POST', '/v1/executions', run, as(keyA))).body.id as string);
  const b = (await s.api('POST', '/v1/executions', run, as(keyB))).body.id as string;
  await until("B's run to start beside A's first", async () => gated.started.includes('tenantB'), 20_000);
  const states = await Promise.all(
    a.map(async (id) => (await s.api('GET', `/v1/executions/${id}`, undefined, as(keyA))).body.state),
  );
  assert.deepEqual(
    states.sort(),
    ['queued', 'queued', 'running'],
    'one of A runs, the rest wait though the worker has room',
  );
  gated.release();
  for (const [id, key] of [...a.map((x) => [x, keyA]), [b, keyB]] as [string, string][]) {
    const done = await s.api('GET', `/v1/executions/${id}?wait=30`, undefined, as(key));
    assert.equal(done.body.state, 'completed');
  }
  assert.equal(gated.most.get('tenantA'), 1);
});

test('runs and uploads through MCP count against the same per-minute quotas', async (t) => {
  const s = await startStack({
    worker: noopBackend,
    env: { SANDGATE_API_KEYS: KEYS, SANDGATE_TENANT_RUNS_PER_MIN: '2', SANDGATE_TENANT_UPLOADS_PER_MIN: '1' },
  });
  t.after(() => s.close());
  const { client } = await mcpClient(s, { apiKey: keyA });
  t.after(() => client.close());
  const tools = toolsOf(client);
  const first = await tools.ok('run_python', { code: 'print(1)' });
  assert.equal(
    (await s.api('POST', '/v1/executions?wait=30', { ...run, session_id: first.session_id }, as(keyA))).status,
    200,
  );
  const over = await tools.fail('run_python', { code: 'print(3)', session_id: first.session_id });
  assert.equal(over.error, 'quota_exceeded', 'the third run in a minute, REST and MCP together');
  await tools.ok('upload_file', { session_id: first.session_id, filename: 'a.txt', content_base64: 'eA==' });
  const upload = await tools.fail('upload_file', {
    session_id: first.session_id,
    filename: 'b.txt',
    content_base64: 'eA==',
  });
  assert.equal(upload.error, 'quota_exceeded');
});
