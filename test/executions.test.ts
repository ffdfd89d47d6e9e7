import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, until } from './harness.ts';
import { readSse } from './sse-client.ts';

const CANARY = `canary-${process.pid}-${Date.now()}`;
/**
 * Names the sandbox the code runs in, pooled or not: Docker sets a container's hostname to its short id; a Pod is
 * known by its IP (the Kubernetes double gives Pods that take a warm network sandbox a shared hostname).
 */
const PRINT_SANDBOX =
  'import socket\nh = socket.gethostname()\ntry:\n    ip = socket.gethostbyname(h)\nexcept OSError:\n    ip = "-"\n' +
  'print(h, ip, flush=True)\n';
const sandboxOf = (printed: string, executionId: string) => {
  const [hostname = '', ip = '-'] = printed.trim().split(' ');
  return { hostname, ip, executionId };
};

test('executions through HTTP keep every sandbox rule', async (t) => {
  const key = 'k'.repeat(32);
  const s = await startStack({
    apiKey: key,
    env: {
      SANDGATE_API_KEYS: `${key}:acme`,
      SANDGATE_SIGNING_KEY: 's'.repeat(40),
      SANDGATE_MAX_OUTPUT_BYTES: '100KB',
      SANDGATE_EXEC_TIMEOUT_S: '30',
    },
  });
  t.after(() => s.close());
  // The worker runs in this process: anything in its environment must stay out of the sandbox.
  process.env.SANDGATE_TEST_CANARY = CANARY;
  t.after(() => {
    delete process.env.SANDGATE_TEST_CANARY;
  });
  const run = (body: object, wait = 60) =>
    s.api('POST', `/v1/executions?wait=${wait}`, { language: 'python', ...body });

  await t.test('javascript and bash run too; stdin and env reach the program', async () => {
    const js = await run({ language: 'javascript', code: 'console.log(6 * 7)' });
    assert.equal(js.body.result.stdout, '42\n');
    const sh = await run({
      language: 'bash',
      code: 'read x; echo "got $x and $GREETING"',
      stdin: 'abc\n',
      env: { GREETING: 'hi' },
    });
    assert.equal(sh.body.result.stdout, 'got abc and hi\n');
    const ready = await s.api('GET', '/readyz');
    assert.equal(ready.status, 200, 'a worker is running, so ready');
    assert.equal(ready.body.checks.workers, '1');
    assert.equal(ready.body.checks.workers_usable, '1', 'its backend answers its probe');
    const runtimes = await s.api('GET', '/v1/runtimes');
    assert.deepEqual(
      runtimes.body.runtimes.map((r: any) => r.language),
      ['python', 'javascript', 'typescript', 'bash'],
    );
  });

  await t.test('no platform secret reaches the sandbox', async () => {
    const r = await run({ code: 'import os, json; print(json.dumps(dict(os.environ)))' });
    const env = JSON.parse(r.body.result.stdout) as Record<string, string>;
    const leaked = Object.entries(env).filter(
      ([k, v]) => /SANDGATE|REDIS/.test(k) || v.includes(key) || v.includes('s'.repeat(40)) || v.includes('redis://'),
    );
    assert.deepEqual(leaked, []);
    assert.ok(!JSON.stringify(env).includes(CANARY), 'a variable of the worker process reached the sandbox');
  });

  await t.test('a while-True loop is killed at the timeout with exit_code -1', async () => {
    const started = Date.now();
    const r = await run({ code: `${PRINT_SANDBOX}while True:\n    pass\n`, timeout_ms: 2000 });
    const elapsed = Date.now() - started;
    assert.equal(r.body.result.state, 'timeout');
    assert.equal(r.body.result.exit_code, -1);
    assert.equal(r.body.result.reason, 'timeout');
    assert.ok(elapsed < 2000 + 2000, `ended after ${elapsed} ms`);
    const sandbox = sandboxOf(r.body.result.stdout, r.body.id);
    if (s.cluster === undefined) assert.match(sandbox.hostname, /^[0-9a-f]{12}$/, "a container's short id");
    await until('its sandbox to be removed', async () => !(await s.sandboxExists(sandbox)), 10_000);
  });

  await t.test('a memory bomb ends as oom', async () => {
    const r = await run({
      code: 'x = []\nwhile True:\n    x.append(bytearray(16 << 20))\n',
      limits: { memory_mb: 128 },
    });
    assert.equal(r.body.result.state, 'failed');
    assert.equal(r.body.result.reason, 'oom');
  });

  await t.test('10 MB of stdout is cut at the cap, flagged, and the worker stays responsive', async () => {
    const r = await run({
      code: "import sys\nfor _ in range(10):\n    sys.stdout.write('x' * (1 << 20))\nprint('done', file=sys.stderr)\n",
    });
    assert.equal(r.body.result.state, 'completed');
    assert.equal(r.body.result.stdout_truncated, true);
    assert.ok(
      r.body.result.stdout.length <= 100_000 && r.body.result.stdout.length > 90_000,
      `${r.body.result.stdout.length}`,
    );
    assert.equal(r.body.result.stderr, 'done\n');
    assert.equal(r.body.result.stderr_truncated, false);
    const next = await run({ code: 'print(1)' });
    assert.equal(next.body.result.stdout, '1\n');
  });

  await t.test('a symlink to /etc/passwd written by the code is neither listed, reported nor served', async () => {
    const r = await run({
      code: "import os\nos.symlink('/etc/passwd', '/mnt/data/x')\nos.symlink('/etc', '/mnt/data/etcdir')\nopen('/mnt/data/ok.txt', 'w').write('fine')\n",
    });
    assert.equal(r.body.result.state, 'completed', r.body.result.stderr);
    assert.deepEqual(
      r.body.result.artifacts.map((a: any) => a.path),
      ['ok.txt'],
    );
    const session = r.body.session_id;
    const listed = (await s.api('GET', `/v1/sessions/${session}/files`)).body.files.map((f: any) => f.path);
    assert.deepEqual(listed, ['ok.txt']);
    for (const p of ['x', 'etcdir/passwd']) {
      const d = await s.api('GET', `/files/${session}/${p}`);
      assert.equal(d.status, 404, p);
      assert.doesNotMatch(JSON.stringify(d.body), /root:/);
    }
  });

  await t.test('a second execution on a busy session gets 409 session_busy', async () => {
    const first = await s.api('POST', '/v1/executions', { language: 'python', code: 'import time; time.sleep(3)' });
    assert.equal(first.status, 202);
    const second = await s.api('POST', '/v1/executions', {
      language: 'python',
      code: 'print(2)',
      session_id: first.body.session_id,
    });
    assert.equal(second.status, 409);
    assert.equal(second.body.code, 'session_busy');
    const session = await s.api('GET', `/v1/sessions/${first.body.session_id}`);
    assert.equal(session.body.state, 'busy');
    assert.equal(session.body.current_execution_id, first.body.id);
    const done = await s.api('GET', `/v1/executions/${first.body.id}?wait=30`);
    assert.equal(done.body.state, 'completed');
    const third = await run({ code: 'print(3)', session_id: first.body.session_id });
    assert.equal(third.body.result.stdout, '3\n', 'the lock is released at the end');
  });

  await t.test('cancel kills a running execution and removes its container', async () => {
    const created = await s.api('POST', '/v1/executions', {
      language: 'python',
      code: `${PRINT_SANDBOX}import time\ntime.sleep(60)\n`,
    });
    let printed = '';
    await readSse(created.body.links.events, {
      headers: { authorization: `Bearer ${key}` },
      onEvent: (ev) => {
        if (ev.event === 'stdout') printed = JSON.parse(ev.data).text.trim();
        return printed === '';
      },
    });
    const sandbox = sandboxOf(printed, created.body.id);
    assert.equal(await s.sandboxExists(sandbox), true, 'running in its sandbox');
    const cancelled = await s.api('POST', `/v1/executions/${created.body.id}/cancel`);
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.state, 'cancelled');
    assert.equal(cancelled.body.result.reason, 'cancelled');
    // A pooled sandbox is killed at once and removed just after the result (off the hot path).
    await until('its sandbox to be removed', async () => !(await s.sandboxExists(sandbox)), 10_000);
    const again = await s.api('POST', `/v1/executions/${created.body.id}/cancel`);
    assert.equal(again.body.state, 'cancelled', 'cancelling twice is harmless');
    const listed = await s.api('GET', `/v1/executions?state=cancelled`);
    assert.ok(listed.body.executions.some((e: any) => e.id === created.body.id));
  });

  await t.test('?wait that runs out answers 202 with the running execution', async () => {
    const r = await s.api('POST', '/v1/executions?wait=0.5', {
      language: 'python',
      code: 'import time; time.sleep(2)',
    });
    assert.equal(r.status, 202);
    assert.ok(['queued', 'running'].includes(r.body.state));
    assert.match(r.headers.get('location') ?? '', new RegExp(`/v1/executions/${r.body.id}$`));
    assert.equal((await s.api('GET', `/v1/executions/${r.body.id}?wait=30`)).body.state, 'completed');
  });
});

test('tenants never see each other: sessions, files, downloads, executions, events', async (t) => {
  const keyA = 'A'.repeat(32);
  const keyB = 'B'.repeat(32);
  const s = await startStack({ env: { SANDGATE_API_KEYS: `${keyA}:alpha,${keyB}:beta` } });
  t.after(() => s.close());
  const A = { authorization: `Bearer ${keyA}` };
  const B = { authorization: `Bearer ${keyB}` };
  const run = await s.api(
    'POST',
    '/v1/executions?wait=60',
    { language: 'python', code: "open('secret.txt','w').write('alpha only')" },
    A,
  );
  assert.equal(run.body.result.state, 'completed');
  const { id, session_id: session } = run.body;

  const probes: [string, string][] = [
    ['GET', `/v1/sessions/${session}`],
    ['DELETE', `/v1/sessions/${session}`],
    ['GET', `/v1/sessions/${session}/files`],
    ['DELETE', `/v1/sessions/${session}/files/secret.txt`],
    ['GET', `/files/${session}/secret.txt`],
    ['GET', `/v1/executions/${id}`],
    ['GET', `/v1/executions/${id}/events`],
    ['POST', `/v1/executions/${id}/cancel`],
  ];
  for (const [method, path] of probes) {
    const r = await s.api(method, path, undefined, B);
    assert.equal(r.status, 404, `${method} ${path} as beta → ${r.status}`);
    assert.doesNotMatch(JSON.stringify(r.body), /alpha only/);
  }
  const put = await s.api('PUT', `/v1/sessions/${session}/files/x.txt`, 'x', { ...B, 'content-type': 'text/plain' });
  assert.equal(put.status, 404);
  const exec = await s.api('POST', '/v1/executions', { language: 'python', code: 'print(1)', session_id: session }, B);
  assert.equal(exec.status, 404);
  assert.deepEqual((await s.api('GET', '/v1/executions', undefined, B)).body.executions, []);
  assert.equal(
    (await s.api('GET', `/files/${session}/secret.txt`, undefined, A)).body,
    'alpha only',
    'alpha still has it all',
  );
});
