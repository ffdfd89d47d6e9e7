import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import { isSandgateError } from '@sandgate/contracts';
import { Workspaces } from '@sandgate/storage';
import { containerName } from './container-spec.ts';
import { DockerBackend } from './docker-backend.ts';
import {
  artifactUrl,
  containerGone,
  docker,
  fixture,
  newSessionId,
  RecordingSink,
  runtimes,
  SANDBOX_UID,
} from '../testing/docker.ts';

const hasRunsc = (await runtimes()).includes('runsc');

test('python, javascript and bash print to stdout and exit 0', async (t) => {
  const f = await fixture(t);
  const cases = [
    { language: 'python', code: 'print("hello from python")', out: 'hello from python\n' },
    { language: 'javascript', code: 'console.log("hello from node")', out: 'hello from node\n' },
    { language: 'bash', code: 'echo "hello from $0"', out: 'hello from bash\n' },
  ] as const;
  for (const c of cases) {
    const sink = new RecordingSink();
    const r = await f.run(f.job({ language: c.language, code: c.code }), sink);
    assert.equal(r.state, 'completed', `${c.language}: ${r.stderr}`);
    assert.equal(r.exit_code, 0);
    assert.equal(r.stdout, c.out);
    assert.equal(sink.stdoutChunks.join(''), c.out);
    assert.deepEqual(sink.phases, ['starting', 'running', 'harvesting']);
  }
});

test('a non-zero exit fails with its code, and stderr is captured', async (t) => {
  const f = await fixture(t);
  const py = await f.run(f.job({ code: 'import sys\nprint("bad", file=sys.stderr)\nsys.exit(3)' }));
  assert.equal(py.state, 'failed');
  assert.equal(py.exit_code, 3);
  assert.equal(py.stderr, 'bad\n');
  assert.equal(py.reason, undefined);
  const trace = await f.run(f.job({ code: '1/0' }));
  assert.equal(trace.exit_code, 1);
  assert.match(trace.stderr, /ZeroDivisionError/);
  const sh = await f.run(f.job({ language: 'bash', code: 'echo oops >&2; exit 42' }));
  assert.equal(sh.exit_code, 42);
  assert.equal(sh.stderr, 'oops\n');
});

test('stdin is delivered and closed; without stdin the program reads EOF', async (t) => {
  const f = await fixture(t);
  const code = 'import sys\ndata = sys.stdin.read()\nprint(repr(data.upper()))';
  const withInput = await f.run(f.job({ code, stdin: 'hello\nworld\n' }));
  assert.equal(withInput.stdout, "'HELLO\\nWORLD\\n'\n");
  const without = await f.run(f.job({ code, stdin: null }));
  assert.equal(without.stdout, "''\n");
});

test('the job env is visible; the worker environment is not', async (t) => {
  const f = await fixture(t);
  process.env.SANDGATE_TEST_SECRET = 'x';
  t.after(() => delete process.env.SANDGATE_TEST_SECRET);
  const r = await f.run(
    f.job({
      code: 'import os, json\nprint(json.dumps(dict(os.environ)))',
      env: { GREETING: 'hi there', EMPTY: '' },
    }),
  );
  const env = JSON.parse(r.stdout) as Record<string, string>;
  assert.equal(env.GREETING, 'hi there');
  assert.equal(env.EMPTY, '');
  assert.equal(env.SANDGATE_TEST_SECRET, undefined);
  for (const name of Object.keys(env)) assert.ok(!name.startsWith('SANDGATE_'), name);
});

test('a run past its timeout is killed and reported as timeout with exit -1', async (t) => {
  const f = await fixture(t);
  const started = performance.now();
  const r = await f.run(f.job({ code: 'while True: pass', timeout_ms: 2000 }));
  const elapsed = performance.now() - started;
  assert.equal(r.state, 'timeout');
  assert.equal(r.exit_code, -1);
  assert.equal(r.reason, 'timeout');
  assert.ok(elapsed < 4000, `took ${elapsed} ms`);
});

test('10 MB of stdout is capped and flagged, and the run returns promptly', async (t) => {
  const f = await fixture(t);
  const sink = new RecordingSink();
  const started = performance.now();
  const r = await f.run(
    f.job({ language: 'bash', code: 'head -c 10485760 /dev/zero | tr "\\0" y; echo done >&2' }),
    sink,
  );
  const elapsed = performance.now() - started;
  assert.equal(r.state, 'completed');
  assert.equal(r.stdout.length, 100_000);
  assert.equal(r.stdout_truncated, true);
  assert.equal(r.stderr, 'done\n');
  assert.equal(r.stderr_truncated, false);
  assert.equal(sink.stdoutChunks.join('').length, 100_000);
  assert.ok(elapsed < 10_000, `took ${elapsed} ms`);
});

test('a 100 MB flood from `yes` does not grow the worker memory', async (t) => {
  const f = await fixture(t);
  const rssBefore = process.memoryUsage().rss;
  const r = await f.run(f.job({ language: 'bash', code: 'yes | head -c 100000000' }));
  const growth = process.memoryUsage().rss - rssBefore;
  assert.equal(r.state, 'completed');
  assert.equal(r.stdout.length, 100_000);
  assert.equal(r.stdout_truncated, true);
  assert.ok(growth < 64 * 1024 * 1024, `rss grew by ${Math.round(growth / 1048576)} MiB`);
});

test('aborting mid-run cancels it and removes the container', async (t) => {
  const f = await fixture(t);
  const job = f.job({ code: 'import time\nprint("ready", flush=True)\ntime.sleep(60)' });
  const abort = new AbortController();
  const sink = new RecordingSink((text) => {
    if (text.includes('ready')) abort.abort();
  });
  const started = performance.now();
  const r = await f.run(job, sink, abort.signal);
  assert.equal(r.state, 'cancelled');
  assert.equal(r.reason, 'cancelled');
  assert.ok(performance.now() - started < 10_000);
  assert.equal(await containerGone(containerName(job.execution_id)), true);
});

test('a signal aborted before the run starts nothing', async (t) => {
  const f = await fixture(t);
  const job = f.job();
  const r = await f.run(job, new RecordingSink(), AbortSignal.abort());
  assert.equal(r.state, 'cancelled');
  assert.equal(r.exit_code, -1);
  assert.equal(await containerGone(containerName(job.execution_id)), true);
});

test('a leftover container of the same execution is replaced', async (t) => {
  const f = await fixture(t);
  const job = f.job({ code: 'print("second")' });
  await f.run(f.job()); // the workspace exists after a first run
  const leftover = await new Dockerode().createContainer({
    name: containerName(job.execution_id),
    Image: 'sandgate/runtime:1',
    Cmd: ['true'],
  });
  const r = await f.run(job);
  assert.equal(r.stdout, 'second\n');
  assert.equal(await containerGone(leftover.id), true);
});

test('a missing image rejects with backend_unavailable', async (t) => {
  const f = await fixture(t, { image: 'sandgate/no-such-image:0' });
  const err = await f.run(f.job()).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(isSandgateError(err), String(err));
  assert.equal(err.code, 'backend_unavailable');
  assert.match(err.message, /sandgate\/no-such-image:0/);
  await assert.rejects(f.backend.check(), { code: 'backend_unavailable' });
});

test('an unreachable engine rejects with backend_unavailable, and its health probe says why', async (t) => {
  const f = await fixture(t, { socketPath: '/nonexistent/docker.sock' });
  await assert.rejects(f.backend.check(), { code: 'backend_unavailable', message: /unreachable/ });
  await assert.rejects(f.run(f.job()), { code: 'backend_unavailable' });
  assert.deepEqual(await f.backend.health(1000), {
    usable: false,
    reason: 'engine unreachable: connect ENOENT /nonexistent/docker.sock',
  });
});

test('check passes against the real engine and image; close is idempotent', async (t) => {
  const f = await fixture(t);
  await f.backend.check();
  await f.backend.close();
  await f.backend.close();
});

test('by default a backend keeps two warm sandboxes of its deployment and instance; close removes them', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'sandgate-backend-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const deployment = `test-${randomBytes(4).toString('hex')}`;
  const backend = new DockerBackend({
    workspaces: new Workspaces({ dataDir, owner: { uid: SANDBOX_UID, gid: SANDBOX_UID } }),
    artifactUrl,
    deployment,
    instanceId: 'worker-default',
  });
  t.after(() => backend.close());
  await backend.poolReady();
  const pool = () =>
    docker.listContainers({ all: true, filters: { label: [`org.sandgate.deployment=${deployment}`] } });
  const listed = await pool();
  assert.equal(listed.length, 2);
  for (const c of listed) {
    assert.equal(c.Labels['org.sandgate.kind'], 'pool');
    assert.equal(c.Labels['org.sandgate.instance'], 'worker-default');
  }
  assert.deepEqual(backend.poolStats(), {
    hits: 0,
    reused: 0,
    misses: 0,
    size: 2,
    ready: 2,
    starting: 0,
    recycled: 0,
    resetFailed: 0,
  });
  await backend.close();
  assert.deepEqual(await pool(), []);
  assert.deepEqual(await readdir(join(dataDir, 'pool')), [], 'and their slot directories');
});

test(
  'runs under gVisor with runtime runsc: cold, pooled, in a session and stateful',
  { skip: hasRunsc ? false : 'the Docker engine has no runsc runtime (docker info)' },
  async (t) => {
    const f = await fixture(t, { runtime: 'runsc', poolSize: 1, poolLimits: { memory_mb: 256, cpus: 1 } });
    await f.backend.poolReady();
    const pooled = await f.run(f.job({ code: 'print(1)' }));
    assert.deepEqual([pooled.state, pooled.stdout, f.backend.poolStats().hits], ['completed', '1\n', 1]);
    const cold = await f.run(f.job({ code: 'print(2)' }));
    assert.deepEqual([cold.state, cold.stdout], ['completed', '2\n']);
    const session = await f.run(f.job({ sandbox: 'session', code: 'import platform\nprint(platform.release())' }));
    assert.equal(session.stdout, '4.4.0\n', 'the gVisor kernel');
    const notebook = newSessionId();
    await f.run(f.job({ sandbox: 'stateful', code: 'x = 20', session_id: notebook }));
    assert.equal((await f.run(f.job({ sandbox: 'stateful', code: 'x + 1', session_id: notebook }))).value, '21');
  },
);
