import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { OutputCollector } from '../outcome/output.ts';
import { runContainer } from './run-container.ts';
import { docker, IMAGE, removeContainer } from '../testing/docker.ts';

async function bare(t: TestContext, script: string, stdin = false) {
  const container = await docker.createContainer({
    Image: IMAGE,
    Cmd: ['bash', '-c', script],
    AttachStdout: true,
    AttachStderr: true,
    OpenStdin: stdin,
    StdinOnce: stdin,
    AttachStdin: stdin,
    HostConfig: { NetworkMode: 'none' },
  });
  t.after(() => removeContainer(container.id));
  return container;
}

const collectors = () => ({ out: new OutputCollector(() => {}), err: new OutputCollector(() => {}) });
const control = (over: Partial<Parameters<typeof runContainer>[2]> = {}) => ({
  timeoutMs: 30_000,
  signal: new AbortController().signal,
  onStarted: () => {},
  ...over,
});

test('stdout and stderr are told apart and every byte before the exit arrives', async (t) => {
  const c = await bare(t, 'for i in $(seq 1000); do echo "out $i"; echo "err $i" >&2; done; exit 7');
  const { out, err } = collectors();
  let started = 0;
  const run = await runContainer(
    c,
    { stdout: out.writable(), stderr: err.writable(), stdin: null },
    control({ onStarted: () => started++ }),
  );
  assert.equal(run.exitCode, 7);
  assert.equal(run.started, true);
  assert.equal(started, 1);
  assert.equal(out.text.split('\n').filter(Boolean).length, 1000);
  assert.ok(out.text.endsWith('out 1000\n'));
  assert.ok(err.text.endsWith('err 1000\n'));
});

test('a program that closes its output and lives on is waited for, not cut short', async (t) => {
  // Without an init holding the descriptors, the attach stream ends before the program exits.
  const c = await bare(t, 'echo bye; exec >&- 2>&-; sleep 1; exit 5');
  const { out, err } = collectors();
  const run = await runContainer(c, { stdout: out.writable(), stderr: err.writable(), stdin: null }, control());
  assert.equal(out.text, 'bye\n');
  assert.equal(run.exitCode, 5);
  assert.ok(run.durationMs >= 1000, `ran ${run.durationMs} ms`);
});

test('a timeout kills with SIGKILL and says so', async (t) => {
  const c = await bare(t, 'trap "" TERM INT; echo started; while :; do :; done');
  const { out, err } = collectors();
  const run = await runContainer(
    c,
    { stdout: out.writable(), stderr: err.writable(), stdin: null },
    control({ timeoutMs: 500 }),
  );
  assert.equal(run.timedOut, true);
  assert.equal(run.cancelled, false);
  assert.equal(run.exitCode, 137);
  assert.equal(out.text, 'started\n');
});

test('stdin is written and closed', async (t) => {
  const c = await bare(t, 'wc -c', true);
  const { out, err } = collectors();
  const run = await runContainer(
    c,
    { stdout: out.writable(), stderr: err.writable(), stdin: 'x'.repeat(200_000) },
    control(),
  );
  assert.equal(run.exitCode, 0);
  assert.equal(out.text.trim(), '200000');
});

test('an already aborted signal never starts the container', async (t) => {
  const c = await bare(t, 'echo should-not-run');
  const { out, err } = collectors();
  const run = await runContainer(
    c,
    { stdout: out.writable(), stderr: err.writable(), stdin: null },
    control({ signal: AbortSignal.abort() }),
  );
  assert.equal(run.started, false);
  assert.equal(run.cancelled, true);
  assert.equal((await c.inspect()).State.Status, 'created');
});
