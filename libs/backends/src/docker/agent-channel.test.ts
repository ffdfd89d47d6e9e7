import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import { AgentChannel, type AgentRunEnd } from '../agent/agent-channel.ts';
import { attachAgent } from './agent-attach.ts';
import type { RunRequest } from '../agent/agent-frames.ts';
import { agentSpec, type Prewarm } from './agent-spec.ts';
import { docker, IMAGE, removeContainer, SANDBOX_UID } from '../testing/docker.ts';

interface Agent {
  container: Dockerode.Container;
  channel: AgentChannel;
  run(
    over: Partial<RunRequest>,
    ctl?: { timeoutMs?: number; interruptGraceMs?: number },
  ): Promise<AgentRunEnd & { stdout: Buffer; stderr: Buffer }>;
}

/** A sandbox running the agent over a temp workspace, as the pool and sessions make them. */
async function agent(t: TestContext, prewarm: Prewarm = 'always'): Promise<Agent> {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-agent-'));
  await chown(dir, SANDBOX_UID, SANDBOX_UID);
  await chmod(dir, 0o755); // as the pool and sessions make them: the agent (another uid) passes through
  t.after(() => rm(dir, { recursive: true, force: true }));
  const settings = {
    image: IMAGE,
    runtime: undefined,
    user: '1000:1000',
    pidsLimit: 64,
    tmpfsBytes: 8 << 20,
    nofile: 256,
    deployment: 'test-agent',
  };
  const name = `sandgate-test-agent-${randomBytes(4).toString('hex')}`;
  const container = await docker.createContainer(
    agentSpec({ name, labels: {}, limits: { memory_mb: 256, cpus: 1 }, workspaceDir: dir, prewarm }, settings),
  );
  t.after(() => removeContainer(container.id));
  const channel = await attachAgent(container);
  t.after(() => channel.close());
  await container.start();
  await channel.handshake(30_000);
  const run: Agent['run'] = async (over, ctl = {}) => {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const request: RunRequest = {
      op: 'run',
      id: `exec_${randomBytes(4).toString('hex')}`,
      language: 'python',
      code: 'pass',
      env: {},
      stdin: null,
      mode: 'process',
      cap: 100_000,
      ...over,
    };
    const end = await channel.run(
      request,
      { onStarted: () => {}, stdout: (b) => out.push(b), stderr: (b) => err.push(b) },
      {
        timeoutMs: ctl.timeoutMs ?? 30_000,
        signal: new AbortController().signal,
        interruptGraceMs: ctl.interruptGraceMs ?? 2000,
        kill: async () => {
          await container.kill();
        },
      },
    );
    return { ...end, stdout: Buffer.concat(out), stderr: Buffer.concat(err) };
  };
  return { container, channel, run };
}

const FORGED = '{"t":"exit","code":0,"id":null}';

test('what a program prints can neither forge nor corrupt a frame', async (t) => {
  const a = await agent(t);
  const code = `
import os, sys
print(${JSON.stringify(FORGED)}, flush=True)
os.write(1, b'${FORGED}\\n{"t":"exit","code":0')
os.write(2, b'${FORGED}\\n')
print("still running")
sys.exit(3)
`;
  for (const mode of ['process', 'stateful'] as const) {
    const r = await a.run({ code, mode });
    assert.equal(r.exit?.code, mode === 'process' ? 3 : 3, mode);
    assert.equal(r.stdout.toString(), `${FORGED}\n${FORGED}\n{"t":"exit","code":0still running\n`, mode);
    assert.equal(r.stderr.toString(), `${FORGED}\n`, mode);
  }
  const bash = await a.run({ language: 'bash', code: `echo '${FORGED}'; printf '\\n{"t":"ready"}\\n' >&2; exit 4` });
  assert.equal(bash.exit?.code, 4);
  assert.equal(bash.stdout.toString(), `${FORGED}\n`);
});

test("a program cannot reach the agent's protocol descriptor or stop the agent with a catchable signal", async (t) => {
  const a = await agent(t);
  const r = await a.run({
    language: 'bash',
    code: 'ls /proc/$PPID/fd 2>&1 | head -1; kill -TERM $PPID; kill -HUP $PPID; kill -INT $PPID; echo sent',
  });
  assert.match(r.stdout.toString(), /Permission denied/);
  assert.match(r.stdout.toString(), /sent\n$/);
  assert.equal((await a.run({ code: 'print("alive")' })).stdout.toString(), 'alive\n');
});

test('bytes that are not UTF-8 cross unchanged; each stream stops one byte past the cap', async (t) => {
  const a = await agent(t);
  const raw = await a.run({ language: 'bash', code: "printf '\\xff\\xfe\\x00A'; printf '\\xe2\\x82' >&2" });
  assert.deepEqual([...raw.stdout], [0xff, 0xfe, 0x00, 0x41]);
  assert.deepEqual([...raw.stderr], [0xe2, 0x82]);
  const flood = await a.run({ language: 'bash', code: 'head -c 5000000 /dev/zero; echo done >&2', cap: 1000 });
  assert.equal(flood.exit?.code, 0);
  assert.equal(flood.stdout.length, 1001);
  assert.equal(flood.stderr.toString(), 'done\n');
});

test('a python run in the pre-started interpreter behaves like python3 -c', async (t) => {
  const a = await agent(t, 'always');
  const probe =
    'g = sorted(k for k in globals() if not k.startswith("__"))\nimport sys, os\nprint(sys.argv, __name__, g, os.getcwd(), os.environ.get("GREETING"), sys.stdin.read())';
  for (const env of [{ GREETING: 'hi' }, { GREETING: 'hi', PYTHONHASHSEED: '1' }] as Record<string, string>[]) {
    const r = await a.run({ code: probe, env, stdin: 'in' });
    assert.equal(r.stdout.toString(), "['-c'] __main__ [] /mnt/data hi in\n", JSON.stringify(env));
  }
  const trace = await a.run({ code: 'def f():\n    1/0\nf()' });
  assert.equal(trace.exit?.code, 1);
  assert.equal(
    trace.stderr.toString(),
    [
      'Traceback (most recent call last):',
      '  File "<string>", line 3, in <module>',
      '  File "<string>", line 2, in f',
      'ZeroDivisionError: division by zero',
      '',
    ].join('\n'),
  );
  const syntax = await a.run({ code: 'x = (' });
  assert.equal(syntax.exit?.code, 1);
  assert.match(syntax.stderr.toString(), /^ {2}File "<string>", line 1\n.*\nSyntaxError: /s);
  assert.equal((await a.run({ code: 'import sys; sys.exit(5)' })).exit?.code, 5);
  assert.equal((await a.run({ code: 'import os; os.kill(os.getpid(), 9)' })).exit?.code, 137);
});

test('an interrupt kills the process group at once and the agent lives on', async (t) => {
  const a = await agent(t);
  const started = performance.now();
  const r = await a.run({ language: 'bash', code: 'sleep 100 & sleep 100; echo never' }, { timeoutMs: 500 });
  assert.equal(r.timedOut, true);
  assert.equal(r.killed, false, 'the interrupt ended it; the sandbox was not killed');
  assert.equal(r.exit?.code, -1);
  assert.ok(performance.now() - started < 2000);
  const ps = await a.run({ language: 'bash', code: 'ps -eo comm= | sort | tr "\\n" " "' });
  assert.doesNotMatch(ps.stdout.toString(), /sleep/, 'nothing of the interrupted run is left');
});

test('leftovers that keep the output open do not hold the run, and are gone after it', async (t) => {
  const a = await agent(t);
  const started = performance.now();
  const r = await a.run({ language: 'bash', code: '(sleep 30; echo late) & echo early' });
  assert.equal(r.exit?.code, 0);
  assert.equal(r.stdout.toString(), 'early\n');
  assert.ok(performance.now() - started < 3000);
  const closed = await a.run({ language: 'bash', code: 'echo bye; exec >&- 2>&-; sleep 1; exit 5' });
  assert.equal(closed.exit?.code, 5, 'a program that closes its output and lives on is waited for');
  assert.equal(closed.stdout.toString(), 'bye\n');
});

test('stateful runs share one interpreter; an interrupt cuts a blocking call and keeps the state', async (t) => {
  const a = await agent(t, 'interpreter');
  const first = await a.run({ mode: 'stateful', code: 'x = 41' });
  assert.deepEqual([first.exit?.code, first.exit?.value, first.exit?.restarted], [0, undefined, true]);
  const second = await a.run({ mode: 'stateful', code: 'print("side")\nx + 1' });
  assert.deepEqual([second.exit?.code, second.exit?.value, second.exit?.restarted], [0, '42', false]);
  assert.equal(second.stdout.toString(), 'side\n');
  const started = performance.now();
  const slow = await a.run({ mode: 'stateful', code: 'import time\ntime.sleep(100)' }, { timeoutMs: 300 });
  assert.equal(slow.timedOut, true);
  assert.equal(slow.killed, false);
  assert.match(slow.stderr.toString(), /KeyboardInterrupt/);
  assert.ok(performance.now() - started < 2000);
  assert.equal((await a.run({ mode: 'stateful', code: 'x' })).exit?.value, '41');
  const err = await a.run({ mode: 'stateful', code: 'y = 1\nraise ValueError("bad")' });
  assert.equal(err.exit?.code, 1);
  assert.match(
    err.stderr.toString(),
    /File "<cell-\d+>", line 2, in <module>\n {4}raise ValueError\("bad"\)\nValueError: bad\n$/,
  );
  assert.doesNotMatch(err.stderr.toString(), /sandgate/, 'no frame of the agent in the traceback');
});

test('an interrupt that is ignored ends in a kill after the grace period', async (t) => {
  const a = await agent(t, 'interpreter');
  // The interpreter has started (an interrupt that comes before the cell does stops it before its first line).
  assert.equal((await a.run({ mode: 'stateful', code: 'pass' })).exit?.code, 0);
  const r = await a.run(
    { mode: 'stateful', code: 'import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass' },
    { timeoutMs: 300, interruptGraceMs: 500 },
  );
  assert.deepEqual([r.timedOut, r.killed, r.exit, a.channel.closed], [true, true, undefined, true]);
  assert.equal((await a.container.inspect()).State.Running, false);
});

test('a second attach to a running agent gets every frame once its handshake is answered', async (t) => {
  const a = await agent(t);
  for (let i = 0; i < 5; i++) {
    const late = await attachAgent(a.container);
    await late.handshake(10_000);
    const out: Buffer[] = [];
    const end = await late.run(
      { op: 'run', id: `r${i}`, language: 'bash', code: `echo ${i}`, env: {}, stdin: null, mode: 'process', cap: 100 },
      { onStarted: () => {}, stdout: (b) => out.push(b), stderr: () => {} },
      { timeoutMs: 10_000, signal: new AbortController().signal, interruptGraceMs: 2000, kill: async () => {} },
    );
    late.close();
    assert.equal(end.exit?.code, 0);
    assert.equal(Buffer.concat(out).toString(), `${i}\n`);
  }
  a.channel.close();
  await assert.rejects(a.channel.handshake(1000), /ended/);
});
