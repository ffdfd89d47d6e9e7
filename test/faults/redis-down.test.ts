import { test } from 'node:test';
import assert from 'node:assert/strict';
import { REDIS_HANG_MS } from '@sandgate/state';
import { until } from '../harness.ts';
import { api, ownRedis, startDeployment } from './processes.ts';

const probes = [
  ['POST', '/v1/sessions', {}],
  ['GET', '/v1/sessions'],
  ['POST', '/v1/executions', { language: 'python', code: 'print(1)' }],
] as const;

test('Redis unreachable: the gateway answers 503 redis_unavailable within a second, and recovers by itself', async (t) => {
  const redis = await ownRedis();
  t.after(() => redis.close());
  const { gateway } = await startDeployment(t, { REDIS_URL: redis.url }, { worker: false });
  assert.equal((await api(gateway.url, 'POST', '/v1/sessions', {})).status, 201);

  await t.test('Redis killed: refused connections answer at once', async () => {
    await redis.stop('SIGKILL');
    for (const [method, path, body] of probes) {
      const r = await api(gateway.url, method, path, body);
      assert.equal(r.status, 503, `${method} ${path}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, 'redis_unavailable');
      assert.ok(r.ms < 1000, `${method} ${path} answered in ${r.ms} ms`);
    }
    const ready = await api(gateway.url, 'GET', '/readyz');
    assert.equal(ready.status, 503);
    assert.equal(ready.body.code, 'not_ready');
    assert.equal((await api(gateway.url, 'GET', '/healthz')).status, 200, 'alive all the same');
    // The scrape still answers, with this gateway's own numbers, and says Redis is away.
    const scrape = await fetch(`${gateway.url}/metrics`);
    assert.equal(scrape.status, 200);
    const text = await scrape.text();
    assert.match(text, /^sandgate_redis_up 0$/m);
    assert.match(text, /^# TYPE sandgate_http_request_duration_seconds histogram$/m);
  });

  await t.test('Redis back: the gateway serves again without a restart', async () => {
    await redis.start();
    const t0 = Date.now();
    await until(
      'a session create to succeed again',
      async () => (await api(gateway.url, 'POST', '/v1/sessions', {})).status === 201,
      15_000,
    );
    t.diagnostic(`recovered ${Date.now() - t0} ms after Redis answered again`);
  });

  await t.test('Redis hung (SIGSTOP): noticed within REDIS_HANG_MS, then requests answer 503 at once', async () => {
    redis.signal('SIGSTOP');
    try {
      // The watchdog takes Redis for hung after REDIS_HANG_MS without a PONG; from then on a request that needs Redis
      // is refused at once. Before, such a request waits for Redis: the probe gives up on it after 250 ms and asks
      // again (/readyz is no measure here: its own PING waits up to 2 s).
      const t0 = Date.now();
      await until(
        'a request to be refused at once (the watchdog took Redis for hung)',
        async () => {
          const r = await fetch(`${gateway.url}/v1/sessions`, { signal: AbortSignal.timeout(250) }).catch(() => null);
          return r?.status === 503 && (await r.json()).code === 'redis_unavailable';
        },
        10_000,
        50,
      );
      assert.equal((await api(gateway.url, 'GET', '/readyz')).body.detail.split(';')[0], 'redis: not answering');
      const noticed = Date.now() - t0;
      t.diagnostic(`a hung Redis was noticed ${noticed} ms after SIGSTOP`);
      assert.ok(noticed < REDIS_HANG_MS + 1500, `noticed after ${noticed} ms`);
      for (const [method, path, body] of probes) {
        const r = await api(gateway.url, method, path, body);
        assert.equal(r.status, 503, `${method} ${path}: ${JSON.stringify(r.body)}`);
        assert.equal(r.body.code, 'redis_unavailable');
        assert.ok(r.ms < 1000, `${method} ${path} answered in ${r.ms} ms`);
      }
    } finally {
      redis.signal('SIGCONT');
    }
    await until(
      'the gateway to serve again',
      async () => (await api(gateway.url, 'GET', '/v1/sessions')).status === 200,
      15_000,
    );
  });
  assert.match(gateway.output(), /lost the connection to Redis/);
  assert.match(gateway.output(), /connected to Redis again/);
});
