import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { startStack, until, type Stack } from './harness.ts';

/** The value of one series in Prometheus text, or undefined. */
async function sample(s: Stack, series: string): Promise<number | undefined> {
  const text = await (await fetch(`${s.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/**
 * An engine that comes and goes at a socket path of the test's own: a Unix socket that forwards to the machine's
 * Docker engine while it is up, and is gone (the path with it) while it is down. The real dockerd never stops, so
 * the tests beside this one keep theirs.
 */
function engineAt(path: string) {
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const engine = connect('/var/run/docker.sock');
    open.add(client);
    client.pipe(engine).pipe(client);
    client.on('close', () => {
      open.delete(client);
      engine.destroy();
    });
    engine.on('close', () => client.destroy());
    client.on('error', () => {});
    engine.on('error', () => {});
  });
  return {
    up: () => new Promise<void>((resolve) => server.listen(path, resolve)),
    /** Stops listening (the socket file goes) and drops the connections the worker holds. */
    down: async () => {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const c of open) c.destroy();
      await closed;
    },
  };
}

test("/readyz follows the workers' engines: 503 with the reason while none is usable, ready once one is", async (t) => {
  const s = await startStack({ backend: 'docker', worker: false, env: { SANDGATE_POOL_SIZE: '0' } });
  t.after(() => s.close());
  const socket = join(s.config.dataDir, 'engine.sock');
  const worker = await s.startWorker(undefined, { SANDGATE_DOCKER_SOCKET: socket });
  const unreachable = `engine unreachable: connect ENOENT ${socket}`;

  const notReady = await until('the worker to report its engine unreachable', async () => {
    const r = await s.api('GET', '/readyz');
    return r.status === 503 && /with a usable backend: 0 \(/.test(r.body.detail) ? r : null;
  });
  assert.equal(notReady.body.code, 'not_ready');
  assert.equal(notReady.body.detail, `redis: ok; live workers: 1, with a usable backend: 0 (docker: ${unreachable})`);
  const stats = await s.api('GET', '/v1/system/stats');
  assert.deepEqual(
    stats.body.workers.map((w: any) => [w.id, w.backend]),
    [[worker.id, { name: 'docker', state: 'unusable', reason: unreachable }]],
  );
  assert.equal(await sample(s, 'sandgate_workers_by_backend_state{state="unusable"}'), 1);
  assert.equal(await sample(s, 'sandgate_workers_by_backend_state{state="usable"}'), 0);
  // What a client sees meanwhile: the worker takes the run and ends it at once, with the engine's own words.
  const run = await s.api('POST', '/v1/executions?wait=30', { language: 'python', code: 'print(1)' });
  assert.equal(run.status, 200);
  assert.equal(run.body.result.state, 'error');
  assert.equal(run.body.result.reason, 'backend_unavailable');
  assert.match(run.body.result.message, /The Docker engine is unreachable \(ENOENT\)/);

  const engine = engineAt(socket);
  await engine.up();
  t.after(() => engine.down());
  const ready = await until('the worker to find its engine back', async () => {
    const r = await s.api('GET', '/readyz');
    return r.status === 200 ? r : null;
  });
  assert.deepEqual(ready.body, { status: 'ready', checks: { redis: 'ok', workers: '1', workers_usable: '1' } });
  // The stats are read at most once a second: the last reading may predate the engine's return.
  const back = await until('the stats to show the engine back', async () => {
    const r = await s.api('GET', '/v1/system/stats');
    return r.body.workers[0].backend.state === 'usable' ? r : null;
  });
  assert.deepEqual(back.body.workers[0].backend, { name: 'docker', state: 'usable' });
  assert.equal(await sample(s, 'sandgate_workers_by_backend_state{state="usable"}'), 1);
  const ran = await s.api('POST', '/v1/executions?wait=60', { language: 'python', code: 'print(1)' });
  assert.equal(ran.body.result.state, 'completed', JSON.stringify(ran.body.result));

  // A second worker on the machine's engine keeps the deployment ready when the first one's engine goes again.
  const other = await s.startWorker();
  await engine.down();
  const partly = await until('one worker of two to report its engine gone', async () => {
    const r = await s.api('GET', '/readyz');
    return r.status === 200 && r.body.checks.workers === '2' && r.body.checks.workers_usable === '1' ? r : null;
  });
  assert.equal(partly.body.checks.redis, 'ok');
  const states = async () => {
    const workers = (await s.api('GET', '/v1/system/stats')).body.workers as { id: string; backend: any }[];
    return JSON.stringify(workers.map((w) => [w.id === worker.id, w.backend.state]).sort());
  };
  await until('the stats to show one usable worker and one not', async () => {
    return (
      (await states()) ===
      JSON.stringify([
        [false, 'usable'],
        [true, 'unusable'],
      ])
    );
  });
  // The worker without an engine stops taking runs while the other can run them: none fails for want of an engine.
  await until('the worker without an engine to leave runs to the other', async () => {
    const workers = (await s.api('GET', '/v1/system/stats')).body.workers as { id: string; taking_runs: boolean }[];
    return workers.find((w) => w.id === worker.id)?.taking_runs === false;
  });
  const burst = await Promise.all(
    Array.from({ length: 8 }, () => s.api('POST', '/v1/executions?wait=120', { language: 'python', code: 'print(2)' })),
  );
  assert.deepEqual(
    burst.map((r) => [r.body.result?.state, r.body.result?.reason ?? null]),
    Array.from({ length: 8 }, () => ['completed', null]),
  );
  // Alone again, it takes runs and ends them at once with the reason, rather than leave them queued.
  await other.close();
  await until('the lone worker to take runs again', async () => {
    const workers = (await s.api('GET', '/v1/system/stats')).body.workers as { id: string; taking_runs: boolean }[];
    return workers.length === 1 && workers[0]!.taking_runs;
  });
  const alone = await s.api('POST', '/v1/executions?wait=30', { language: 'python', code: 'print(3)' });
  assert.equal(alone.status, 200);
  assert.equal(alone.body.result.reason, 'backend_unavailable');
});
