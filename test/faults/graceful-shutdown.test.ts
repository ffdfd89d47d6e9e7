import { test } from 'node:test';
import assert from 'node:assert/strict';
import { until } from '../harness.ts';
import { api, startDeployment, startGatewayProc, startWorkerProc } from './processes.ts';

const sleep = (s: number, out: string) => ({
  language: 'python',
  code: `import time\ntime.sleep(${s})\nprint("${out}")`,
});

test('SIGTERM drains: no new work is taken, in-flight runs finish within the grace period or end with a reason', async (t) => {
  const started = await startDeployment(t, { SANDGATE_SHUTDOWN_GRACE_S: '6' });
  const { d, gateway } = started;
  const worker = started.worker!;

  const short = (await api(gateway.url, 'POST', '/v1/executions', sleep(2, 'short'))).body.id as string;
  const long = (await api(gateway.url, 'POST', '/v1/executions', sleep(60, 'long'))).body.id as string;
  await until(
    'both runs to be running',
    async () =>
      (await Promise.all([short, long].map((id) => api(gateway.url, 'GET', `/v1/executions/${id}`)))).every(
        (r) => r.body.state === 'running',
      ),
    60_000,
  );
  const waiting = (await api(gateway.url, 'POST', '/v1/executions', { language: 'python', code: 'print("queued")' }))
    .body.id as string;

  await t.test(
    'the worker finishes what it can, stops the rest with reason shutdown, and takes nothing new',
    async () => {
      const t0 = Date.now();
      worker.kill('SIGTERM');
      assert.equal(await worker.exited, 0);
      const took = Date.now() - t0;
      assert.ok(took >= 5000 && took < 20_000, `the worker exited ${took} ms after SIGTERM (grace 6 s)`);
      const [s, l, q] = await Promise.all(
        [short, long, waiting].map((id) => api(gateway.url, 'GET', `/v1/executions/${id}`)),
      );
      assert.deepEqual([s!.body.state, s!.body.result.stdout], ['completed', 'short\n']);
      assert.deepEqual([l!.body.state, l!.body.result.reason], ['error', 'shutdown']);
      assert.match(l!.body.result.message, /grace period of 6 s/);
      assert.equal(q!.body.state, 'queued', 'a stopping worker takes no new run');
    },
  );

  await t.test('the gateway ends SSE streams with a reconnect hint, answers long polls, and exits', async () => {
    const slow = (await api(gateway.url, 'POST', '/v1/executions', sleep(1, 'x'))).body.id as string;
    const sse = await fetch(`${gateway.url}/v1/executions/${slow}/events`);
    const poll = api(gateway.url, 'GET', `/v1/executions/${slow}?wait=120`);
    const text = sse.text();
    // Both are open (the SSE stream has sent its first frame) before the signal.
    await until(
      'the long poll to be in flight',
      async () => gateway.output().includes(`"execution_id":"${slow}"`),
      10_000,
    );
    const t0 = Date.now();
    gateway.kill('SIGTERM');
    assert.match(await text, /shutting down; reconnect with Last-Event-ID\nretry: 250\n/);
    const answered = await poll;
    assert.equal(answered.status, 200);
    assert.equal(answered.body.state, 'queued', 'the long poll answers with the run as it is');
    assert.equal(await gateway.exited, 0);
    assert.ok(Date.now() - t0 < 5000, `the gateway exited ${Date.now() - t0} ms after SIGTERM`);
    await assert.rejects(fetch(`${gateway.url}/healthz`), 'no new connections');
  });

  await t.test('nothing was lost: a new worker and gateway run the queued work', async () => {
    const g2 = await startGatewayProc(d.env);
    t.after(() => g2.kill('SIGKILL'));
    const w2 = await startWorkerProc(d.env);
    t.after(() => w2.kill('SIGKILL'));
    const done = await api(g2.url, 'GET', `/v1/executions/${waiting}?wait=60`);
    assert.deepEqual([done.body.state, done.body.result?.stdout], ['completed', 'queued\n']);
  });
});
