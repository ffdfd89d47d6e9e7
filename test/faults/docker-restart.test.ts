import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { loadConfig } from '@sandgate/config';
import { until } from '../harness.ts';
import { ownDockerd } from './own-dockerd.ts';
import { api, startDeployment } from './processes.ts';

test('Docker engine restarted mid-run: the run ends with a platform reason, the worker carries on, orphans are swept', async (t) => {
  const image = loadConfig({}).image;
  const links = () => execFileSync('ip', ['-o', 'link', 'show', 'type', 'bridge'], { encoding: 'utf8' });
  const sharedBridge = /\bdocker0\b/.test(links());
  const engine = await ownDockerd(image);
  t.after(async () => {
    await engine.close();
    // The second engine must leave the shared engine's network alone.
    if (sharedBridge) assert.match(links(), /\bdocker0\b/, 'the shared engine lost its docker0 bridge');
  });
  t.diagnostic(`copied ${image} into the test's own engine in ${engine.loadMs} ms`);
  const { d, gateway } = await startDeployment(t, { DOCKER_HOST: engine.host, SANDGATE_POOL_SIZE: '1' });
  const ours = () =>
    engine.docker.listContainers({ all: true, filters: { label: [`org.sandgate.deployment=${d.prefix}`] } });

  const session = (await api(gateway.url, 'POST', '/v1/sessions', {})).body.id as string;
  const warm = await api(gateway.url, 'POST', '/v1/executions?wait=60', {
    session_id: session,
    language: 'python',
    code: 'print("session up")',
  });
  assert.equal(warm.body.result?.stdout, 'session up\n');
  const run = (
    await api(gateway.url, 'POST', '/v1/executions', { language: 'python', code: 'import time\ntime.sleep(120)' })
  ).body.id as string;
  await until(
    'the run to be running',
    async () => (await api(gateway.url, 'GET', `/v1/executions/${run}`)).body.state === 'running',
    60_000,
  );

  await engine.stop();
  const ended = await until(
    'the run to end',
    async () => {
      const r = await api(gateway.url, 'GET', `/v1/executions/${run}`);
      return r.body.result ? r.body : null;
    },
    60_000,
    250,
  );
  t.diagnostic(`ended as ${ended.state}/${ended.result.reason}: ${ended.result.message ?? ''}`);
  assert.equal(ended.state, 'error');
  assert.equal(ended.result.reason, 'backend_unavailable');

  await engine.start();
  const next = await until(
    'a one-shot to succeed on the restarted engine',
    async () => {
      const r = await api(gateway.url, 'POST', '/v1/executions?wait=60', { language: 'python', code: 'print("back")' });
      return r.body.result?.state === 'completed' ? r.body : null;
    },
    90_000,
    1000,
  );
  assert.equal(next.result.stdout, 'back\n');
  const again = await api(gateway.url, 'POST', '/v1/executions?wait=60', {
    session_id: session,
    language: 'python',
    code: 'print("session again")',
  });
  assert.equal(
    again.body.result?.stdout,
    'session again\n',
    'the session sandbox stopped with the engine is started afresh',
  );
  await until(
    "the stopped run's container to be swept",
    async () => (await ours()).every((c) => c.Labels['org.sandgate.execution'] !== run),
    30_000,
  );
  // A sandbox that has just ended is `exited` for the moment its removal takes; one the engine stopped and nobody
  // removed would stay so. (`created` is a pool refill under way.)
  const stopped = async () =>
    (await ours())
      .filter((c) => c.State === 'exited' || c.State === 'dead')
      .map((c) => `${c.Labels['org.sandgate.kind']} ${c.State} ${c.Status}`);
  await until('no stopped container of ours to be left', async () => (await stopped()).length === 0, 30_000).catch(
    async (err: Error) => assert.fail(`${err.message}: ${(await stopped()).join('; ')}`),
  );
});
