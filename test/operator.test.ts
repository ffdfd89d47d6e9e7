import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway } from '@sandgate/gateway';
import { createLogger, loadConfig } from '@sandgate/config';
import { freePort } from './redis-and-ports.ts';
import { startStack, TEST_BACKEND, until } from './harness.ts';

const TENANT_KEY = 'tenant-key-0123456789';
const OPERATOR_KEY = 'operator-key-0123456789';

/** The value of one series in Prometheus text, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test('operator endpoints: an operator key reads them, a tenant key is forbidden, no key is unauthorized', async (t) => {
  const s = await startStack({
    worker: false,
    env: { SANDGATE_API_KEYS: `${TENANT_KEY}:acme`, SANDGATE_OPERATOR_KEYS: OPERATOR_KEY },
  });
  t.after(() => s.close());
  for (const path of ['/metrics', '/v1/system/stats']) {
    const none = await s.api('GET', path);
    assert.equal(none.status, 401);
    assert.equal(none.body.code, 'unauthorized');
    const tenant = await s.api('GET', path, undefined, { authorization: `Bearer ${TENANT_KEY}` });
    assert.equal(tenant.status, 403, path);
    assert.equal(tenant.body.code, 'forbidden');
    assert.equal(tenant.headers.get('content-type'), 'application/problem+json; charset=utf-8');
    const operator = await s.api('GET', path, undefined, { authorization: `Bearer ${OPERATOR_KEY}` });
    assert.equal(operator.status, 200, path);
  }
  // An operator key is not a tenant's: it reaches no tenant route.
  const sessions = await s.api('GET', '/v1/sessions', undefined, { authorization: `Bearer ${OPERATOR_KEY}` });
  assert.equal(sessions.status, 401);
});

test('/metrics and /v1/system/stats count a run, its pool hit, the worker and an SSE subscriber', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  await s.poolReady();
  const before = await s.api('GET', '/v1/system/stats');
  assert.equal(before.status, 200);
  assert.equal(before.body.executions.completed, 0);

  const run = await s.api('POST', '/v1/executions?wait=60', { language: 'python', code: 'print(1)' });
  assert.equal(run.body.state, 'completed');
  const failed = await s.api('POST', '/v1/executions?wait=60', { language: 'python', code: 'raise SystemExit(3)' });
  assert.equal(failed.body.state, 'failed');

  // A client following a run that is still going stays subscribed.
  const slow = await s.api('POST', '/v1/executions', { language: 'python', code: 'import time\ntime.sleep(60)' });
  const ac = new AbortController();
  const follower = await fetch(`${s.url}/v1/executions/${slow.body.id}/events`, { signal: ac.signal });
  t.after(() => ac.abort());
  assert.equal(follower.status, 200);

  const stats = await until(
    'the worker and gateway to publish their snapshots and the runs to be counted',
    async () => {
      const r = await s.api('GET', '/v1/system/stats');
      const b = r.body;
      return b.workers.length === 1 && b.executions.completed === 1 && b.pool.hits >= 1 && b.sse_subscribers === 1
        ? b
        : null;
    },
    20_000,
  );
  assert.equal(stats.executions.failed, 1);
  assert.equal(stats.workers[0].concurrency, s.config.workerConcurrency);
  assert.equal(stats.workers[0].id, s.worker!.id);
  assert.deepEqual(stats.workers[0].backend, { name: TEST_BACKEND, state: 'usable' });
  assert.ok(Date.parse(stats.generated_at) > 0);

  const metrics = await fetch(`${s.url}/metrics`);
  assert.equal(metrics.status, 200);
  assert.match(metrics.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const text = await metrics.text();
  for (const name of [
    'sandgate_http_request_duration_seconds',
    'sandgate_queue_jobs',
    'sandgate_queue_wait_seconds',
    'sandgate_executions_total',
    'sandgate_execution_duration_seconds',
    'sandgate_pool_events_total',
    'sandgate_pool_ready',
    'sandgate_session_sandboxes',
    'sandgate_live_sessions',
    'sandgate_sse_subscribers',
    'sandgate_workers_alive',
    'sandgate_workers_by_backend_state',
    'sandgate_redis_errors_total',
    'sandgate_engine_errors_total',
    'process_cpu_seconds_total',
    'nodejs_eventloop_lag_seconds',
  ])
    assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), name);
  assert.equal(sample(text, 'sandgate_executions_total{state="completed",reason=""}'), 1);
  assert.equal(sample(text, 'sandgate_executions_total{state="failed",reason=""}'), 1);
  assert.equal(sample(text, 'sandgate_workers_alive'), 1);
  assert.equal(sample(text, 'sandgate_workers_by_backend_state{state="usable"}'), 1);
  assert.equal(sample(text, 'sandgate_workers_by_backend_state{state="unusable"}'), 0);
  assert.equal(sample(text, 'sandgate_sse_subscribers'), 1);
  assert.equal(sample(text, 'sandgate_execution_duration_seconds_count{language="python",state="completed"}'), 1);
  assert.ok((sample(text, 'sandgate_queue_wait_seconds_count') ?? 0) >= 2);
  assert.ok((sample(text, 'sandgate_pool_events_total{event="hit"}') ?? 0) >= 1);
  // Routes by pattern, never by raw URL: ids would make a series per run.
  assert.match(
    text,
    /sandgate_http_request_duration_seconds_count\{method="POST",route="\/v1\/executions",status_code="200"\} 2/,
  );
  assert.doesNotMatch(text, /route="\/v1\/executions\/exec_/);
  // Not left for the worker's shutdown grace to stop.
  assert.equal((await s.api('POST', `/v1/executions/${slow.body.id}/cancel`)).body.state, 'cancelled');
});

test('SANDGATE_METRICS_PORT serves /metrics without a key on loopback, and nothing else', async (t) => {
  const s = await startStack({ worker: false, env: { SANDGATE_API_KEYS: `${TENANT_KEY}:acme` } });
  t.after(() => s.close());
  const config = loadConfig({
    ...s.env,
    SANDGATE_PORT: String(await freePort()),
    SANDGATE_METRICS_PORT: String(await freePort()),
  });
  const gateway = await startGateway(config, createLogger(config, 'metrics-port-test', { tty: false }));
  t.after(() => gateway.close());
  assert.ok(gateway.metricsUrl?.startsWith('http://127.0.0.1:'));
  const res = await fetch(gateway.metricsUrl!);
  assert.equal(res.status, 200);
  assert.match(await res.text(), /^# TYPE sandgate_executions_total counter$/m);
  assert.equal((await fetch(gateway.metricsUrl!.replace('/metrics', '/v1/sessions'))).status, 404);
  // On the main port the same endpoint still wants a key.
  assert.equal((await fetch(`${gateway.url}/metrics`)).status, 401);
});
