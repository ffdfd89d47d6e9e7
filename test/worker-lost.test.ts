import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startStack, until } from './harness.ts';

const WORKER_MAIN = fileURLToPath(new URL('../apps/worker/src/main.ts', import.meta.url));

const LINES = Array.from({ length: 6 }, (_, i) => `line ${i}\n`).join('');

test('a worker killed with SIGKILL mid-run: the execution ends as worker_lost, with what it streamed, and its container is removed', async (t) => {
  const s = await startStack({ worker: false });
  t.after(() => s.close());
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER_MAIN], {
    env: { ...process.env, ...s.env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });

  const code = 'import time\nfor i in range(6):\n    print(f"line {i}", flush=True)\ntime.sleep(120)\n';
  const created = await s.api('POST', '/v1/executions', { language: 'python', code });
  assert.equal(created.status, 202);
  const id = created.body.id as string;
  await until(
    'the run to start in the child worker',
    async () => (await s.api('GET', `/v1/executions/${id}`)).body.state === 'running',
    60_000,
  );
  await until('its sandbox', async () => (await s.sandboxesOf(id)) > 0, 20_000);
  await until(
    'its six lines to be streamed',
    async () => (await s.api('GET', `/v1/executions/${id}/output`)).body.stdout === LINES,
    20_000,
  );

  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  assert.equal(await s.sandboxesOf(id), 1, 'the sandbox outlives its worker');

  const killedAt = Date.now();
  await s.startWorker();
  const ended = await until(
    'a terminal state',
    async () => {
      const r = await s.api('GET', `/v1/executions/${id}`);
      return r.body.result ? r.body : null;
    },
    30_000,
  );
  assert.equal(ended.state, 'error', stderr);
  assert.equal(ended.result.reason, 'worker_lost');
  assert.equal(ended.result.stdout, LINES, 'the result carries what the run streamed before its worker stopped');
  assert.equal(ended.result.stdout_truncated, false);
  assert.ok(ended.result.duration_ms > 0, `duration_ms ${ended.result.duration_ms}`);
  await until('the orphaned sandbox to be removed', async () => (await s.sandboxesOf(id)) === 0, 30_000);
  const took = Date.now() - killedAt;
  assert.ok(took < 20_000, `cleaned up ${took} ms after the kill (lease 3 s, sweep every 2 s)`);

  const session = await s.api('GET', `/v1/sessions/${created.body.session_id}`);
  assert.equal(session.body.state, 'idle', 'the session lock is released');
  const next = await s.api('POST', '/v1/executions?wait=60', {
    language: 'python',
    code: 'print("after")',
    session_id: created.body.session_id,
  });
  assert.equal(next.body.result.stdout, 'after\n');
});
