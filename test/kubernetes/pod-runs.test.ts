import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { startStack, until, type Stack } from '../harness.ts';

/** No warm Pods: every one-shot gets a Pod of its own (stage, runner, harvest), the path these tests are about. */
const ONE_POD_EACH = { SANDGATE_POOL_SIZE: '0' };

/**
 * The Kubernetes backend end to end: a gateway, a worker with SANDGATE_BACKEND=kubernetes, and the test cluster
 * (kube-apiserver and a kubelet) that runs each one-shot's Pod (stage, runner, harvest), whose files cross through
 * the gateway, and each session's long-lived Pod, whose files the worker moves over its connection to the agent.
 */

const run = async (s: Stack, body: Record<string, unknown>) => {
  const res = await s.api('POST', '/v1/executions?wait=90', { language: 'python', ...body });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body as { id: string; state: string; result: Record<string, any> };
};

/** The sandbox Pods and Secrets of the stack's deployment still in the cluster. */
const leftovers = async (s: Stack) => {
  const ns = s.cluster!;
  const labelSelector = `org.sandgate.deployment=${s.config.redisPrefix}`;
  const pods = await ns.core.listNamespacedPod({ namespace: ns.name, labelSelector });
  const secrets = await ns.core.listNamespacedSecret({ namespace: ns.name, labelSelector });
  return { pods: pods.items.length, secrets: secrets.items.length };
};

test('kubernetes: one-shots in a Pod each — output, exit, stdin, env, artifacts, limits, cancel, nothing left behind', async (t) => {
  const s = await startStack({ backend: 'kubernetes', env: { ...ONE_POD_EACH, SANDGATE_MAX_OUTPUT_BYTES: '20KB' } });
  t.after(() => s.close());

  await t.test('stdout, stderr, stdin and env; a non-zero exit fails the run', async () => {
    const r = await run(s, {
      stdin: 'from stdin',
      env: { GREETING: 'hello' },
      code:
        'import os, sys\nprint(os.environ["GREETING"], sys.stdin.read())\nprint("é to stderr", file=sys.stderr)\n' +
        'print(sorted(k for k in os.environ if k.startswith(("SANDGATE", "KUBERNETES", "REDIS"))))\nsys.exit(3)',
    });
    assert.equal(r.result.state, 'failed');
    assert.equal(r.result.exit_code, 3);
    assert.equal(r.result.stdout, 'hello from stdin\n[]\n', 'no platform variable reaches the code');
    assert.equal(r.result.stderr, 'é to stderr\n');
  });

  await t.test('files the run writes come back as artifacts, downloadable with the same bytes', async () => {
    const r = await run(s, {
      code: 'import os\nos.makedirs("out", exist_ok=True)\nopen("out/data.bin", "wb").write(bytes(range(256)) * 1000)\nprint("ok")',
    });
    assert.equal(r.result.state, 'completed', r.result.stderr);
    assert.deepEqual(
      r.result.artifacts.map((a: any) => [a.path, a.size_bytes]),
      [['out/data.bin', 256_000]],
    );
    const body = Buffer.from(await (await fetch(r.result.artifacts[0].download_url)).arrayBuffer());
    assert.ok(body.equals(Buffer.from(Array.from({ length: 256_000 }, (_, i) => i % 256))));
  });

  await t.test('output is capped at the source: the result is cut at the cap and says so', async () => {
    const r = await run(s, { code: 'import sys\nsys.stdout.write("x" * 1_000_000)' });
    assert.equal(r.result.state, 'completed');
    assert.equal(r.result.stdout.length, 20_000);
    assert.equal(r.result.stdout_truncated, true);
  });

  await t.test('timeout: the run is killed at its limit, with what it printed before', async () => {
    const r = await run(s, { timeout_ms: 2000, code: 'import time\nprint("started", flush=True)\ntime.sleep(60)' });
    assert.equal(r.result.state, 'timeout');
    assert.equal(r.result.reason, 'timeout');
    assert.equal(r.result.stdout, 'started\n');
  });

  await t.test('memory: a run past its limit is OOM-killed and reported as oom', async () => {
    const r = await run(s, { limits: { memory_mb: 64 }, code: 'x = bytearray(512 * 1024 * 1024)\nprint("survived")' });
    assert.equal(r.result.state, 'failed');
    assert.equal(r.result.reason, 'oom', JSON.stringify(r.result));
  });

  await t.test('links and special files in the workspace are never followed nor sent back', async () => {
    const r = await run(s, {
      code:
        'import os\nos.symlink("/etc/passwd", "link")\nos.mkfifo("fifo")\nopen("real.txt", "w").write("real")\n' +
        'os.link("real.txt", "hard.txt")\nopen("plain.txt", "w").write("plain")',
    });
    assert.equal(r.result.state, 'completed', r.result.stderr);
    assert.deepEqual(
      r.result.artifacts.map((a: any) => a.path),
      ['plain.txt'],
    );
  });

  await t.test('no network: the runner reaches nothing on this host but the gateway it has no token for', async () => {
    const server = createServer((socket) => socket.end('reached\n'));
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    t.after(() => server.close());
    const port = (server.address() as { port: number }).port;
    const r = await run(s, {
      code:
        `import socket\ntry:\n  socket.create_connection(("${s.cluster!.hostIP}", ${port}), timeout=2).recv(16)\n  print("reached")\n` +
        'except OSError as e:\n  print("blocked", type(e).__name__)',
    });
    assert.match(r.result.stdout, /^blocked /);
  });

  await t.test('cancel: a running Pod is stopped and deleted', async () => {
    const created = await s.api('POST', '/v1/executions', {
      language: 'python',
      code: 'import time\nprint("up", flush=True)\ntime.sleep(60)',
    });
    assert.equal(created.status, 202);
    const id = created.body.id as string;
    await until('the run to start', async () => (await s.api('GET', `/v1/executions/${id}`)).body.state === 'running');
    assert.equal((await s.api('POST', `/v1/executions/${id}/cancel`)).status, 200);
    const ended = await s.api('GET', `/v1/executions/${id}?wait=30`);
    assert.equal(ended.body.state, 'cancelled');
  });

  await t.test('every Pod and Secret is gone once its run has ended', async () => {
    const left = await until('the sandbox Pods and Secrets to be deleted', async () => {
      const l = await leftovers(s);
      return l.pods === 0 && l.secrets === 0 ? l : null;
    });
    assert.deepEqual([left.pods, left.secrets], [0, 0]);
  });
});

test('kubernetes: a process session keeps its files in its Pod; uploads in, writes and deletes out', async (t) => {
  const s = await startStack({ backend: 'kubernetes' });
  t.after(() => s.close());
  const session = (await s.api('POST', '/v1/sessions', { mode: 'process' })).body.id as string;
  const up = await s.api('PUT', `/v1/sessions/${session}/files/in/data.csv`, 'a,b\n1,2\n', {
    'content-type': 'text/csv',
  });
  assert.equal(up.status, 201);

  const first = await run(s, {
    session_id: session,
    code:
      'import os\nrows = open("in/data.csv").read().splitlines()\nopen("count.txt", "w").write(str(len(rows)))\n' +
      'os.remove("in/data.csv")\nprint(len(rows))',
  });
  assert.equal(first.result.state, 'completed', first.result.stderr);
  assert.equal(first.result.stdout, '2\n');
  assert.deepEqual(
    first.result.artifacts.map((a: any) => a.path),
    ['count.txt'],
  );
  const files = (await s.api('GET', `/v1/sessions/${session}/files`)).body.files.map((f: any) => f.path);
  assert.deepEqual(files, ['count.txt'], 'the file the run deleted is gone from the session too');

  const second = await run(s, { session_id: session, language: 'bash', code: 'cat count.txt; ls' });
  // The directory the run emptied stays, as in a Docker session's workspace.
  assert.equal(second.result.stdout, '2count.txt\nin\n');
  assert.deepEqual(second.result.artifacts, [], 'a file read, not changed, is no artifact');
});
