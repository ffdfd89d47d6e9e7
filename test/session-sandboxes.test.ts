import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile, readlink } from 'node:fs/promises';
import Dockerode from 'dockerode';
import { startStack, TEST_BACKEND } from './harness.ts';
import { readSse } from './sse-client.ts';
import { assertGenuine, forger } from './stateful-forger.ts';

const K8S = TEST_BACKEND === 'kubernetes';

test('stateful sessions keep a live interpreter, like a notebook', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const session = async () => {
    const r = await s.api('POST', '/v1/sessions', { mode: 'stateful' });
    assert.equal(r.status, 201);
    assert.equal(r.body.mode, 'stateful');
    return r.body.id as string;
  };
  const sid = await session();
  const run = async (code: string, extra: object = {}, id = sid) =>
    (await s.api('POST', '/v1/executions?wait=60', { session_id: id, language: 'python', code, ...extra })).body;

  await t.test('variables persist and the last expression is returned', async () => {
    const first = await run('x = 41');
    assert.equal(first.result.state, 'completed', first.result.stderr);
    assert.equal(first.result.interpreter_restarted ?? false, false, 'first use is not a restart');
    const second = await run('x + 1');
    assert.equal(second.result.value, '42');
  });

  await t.test('a DataFrame loaded in one call is used in the next', async () => {
    await s.api('PUT', `/v1/sessions/${sid}/files/sales.csv`, 'region,amount\nnorth,10\nsouth,32\n', {
      'content-type': 'text/csv',
    });
    assert.equal((await run("import pandas as pd\ndf = pd.read_csv('sales.csv')")).result.state, 'completed');
    const total = await run("print(df['amount'].sum())");
    assert.equal(total.result.stdout, '42\n');
  });

  await t.test('a cell that runs past its timeout is interrupted and the session lives on', async () => {
    const slow = await run('while True:\n    pass\n', { timeout_ms: 1500 });
    assert.equal(slow.result.state, 'timeout');
    assert.equal(slow.result.exit_code, -1);
    const after = await run('x');
    assert.equal(after.result.value, '41', 'state survived the interrupt');
  });

  await t.test('an interpreter that dies is reported, and the next call gets a fresh one', async () => {
    const died = await run('import os\nos._exit(1)');
    assert.notEqual(died.result.state, 'completed');
    const fresh = await run('print("alive")');
    assert.equal(fresh.result.stdout, 'alive\n');
    assert.equal(fresh.result.interpreter_restarted, true);
    const gone = await run('x');
    assert.match(gone.result.stderr, /NameError/);
  });

  await t.test('two sessions never share state', async () => {
    const other = await session();
    await run('secret = "mine"');
    const r = await run('secret', {}, other);
    assert.match(r.result.stderr, /NameError/);
  });

  await t.test('plt.show() turns figures into PNG artifacts', async () => {
    const r = await run('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()');
    assert.equal(r.result.state, 'completed', r.result.stderr);
    const pngs = r.result.artifacts.filter((a: { mime_type: string }) => a.mime_type === 'image/png');
    assert.equal(pngs.length, 1);
    const bytes = Buffer.from(await (await fetch(pngs[0].download_url)).arrayBuffer());
    assert.equal(bytes.subarray(1, 4).toString(), 'PNG');
  });

  await t.test('restart resets the interpreter; files stay', async () => {
    await run('y = 1');
    const restarted = await s.api('POST', `/v1/sessions/${sid}/restart`);
    assert.equal(restarted.status, 200);
    const r = await run("import os\nprint(os.path.exists('sales.csv'))\ny");
    assert.equal(r.result.stdout, 'True\n', JSON.stringify(r.result));
    assert.match(r.result.stderr, /NameError/);
    assert.equal(r.result.interpreter_restarted, true);
  });

  await t.test('stateful sessions run python only', async () => {
    const r = await s.api('POST', '/v1/executions', { session_id: sid, language: 'bash', code: 'echo hi' });
    assert.equal(r.status, 400);
    assert.equal(r.body.code, 'unsupported_language');
  });
});

test("a session sandbox removed behind sandgate's back is recreated with the files intact", async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const sid = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const run = async (code: string) =>
    (await s.api('POST', '/v1/executions?wait=60', { session_id: sid, language: 'python', code })).body;
  const first = await run("open('keep.txt', 'w').write('kept')\nimport os\nprint(os.getpid())");
  assert.equal(first.result.state, 'completed', first.result.stderr);
  const sandbox = await s.sessionSandbox(sid);
  assert.ok(sandbox, 'the session has a long-lived sandbox');
  const reused = await run('print(1)');
  assert.equal(reused.result.stdout, '1\n');
  assert.equal(await s.sessionSandbox(sid), sandbox, 'reused, not recreated');

  await s.removeSessionSandbox(sid);
  const after = await run("print(open('keep.txt').read())");
  assert.equal(after.result.state, 'completed', JSON.stringify(after.result));
  assert.equal(after.result.stdout, 'kept\n');
  const replacement = await s.sessionSandbox(sid);
  assert.ok(replacement);
  assert.notEqual(replacement, sandbox);

  assert.equal((await s.api('DELETE', `/v1/sessions/${sid}`)).status, 204);
});

/** Where the cell stands: which other processes (it starts none) it can signal, trace, or look into through /proc. */
const PROBE = String.raw`
import ctypes, json, os, signal
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
report = {"signal": [], "ptrace": [], "fds": [], "mem": []}
for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) == me:
        continue
    pid = int(name)
    try:
        os.kill(pid, 0)
        report["signal"].append(pid)
    except OSError:
        pass
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        report["ptrace"].append(pid)
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    try:
        os.listdir("/proc/%d/fd" % pid)
        report["fds"].append(pid)
    except OSError:
        pass
    try:
        open("/proc/%d/mem" % pid, "rb").close()
        report["mem"].append(pid)
    except OSError:
        pass
print(json.dumps(report))
`;

test('a stateful cell can neither forge its run result nor reach the agent', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const sid = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
  const run = async (code: string) =>
    (await s.api('POST', '/v1/executions?wait=60', { session_id: sid, language: 'python', code })).body;
  assert.equal((await run('x = 41')).result.state, 'completed');

  await t.test('a forged exit frame never becomes the result: the run ends when the cell does', async () => {
    // On Docker the session's files are the sandbox's own directory, so the test hands the cell its run id through a
    // file while it runs, and the forged exit is a real try. A Kubernetes session Pod gets the session's files only
    // before each run (the worker moves them): nothing reaches a running cell, which then has no way to learn its id.
    const queued = await s.api('POST', '/v1/executions', { session_id: sid, language: 'python', code: forger(!K8S) });
    assert.equal(queued.status, 202, JSON.stringify(queued.body));
    const id = queued.body.id as string;
    // The phase `running` comes once the worker has moved the session's files into a Kubernetes session Pod for this
    // run (the execution's state is `running` earlier, as soon as a worker takes it).
    if (K8S)
      await readSse(`${s.url}/v1/executions/${id}/events`, {
        onEvent: (ev) => !(ev.event === 'phase' && JSON.parse(ev.data).phase === 'running'),
      });
    const put = await s.api('PUT', `/v1/sessions/${sid}/files/run-id.txt`, id, { 'content-type': 'text/plain' });
    assert.equal(put.status, 201, JSON.stringify(put.body));
    const done = (await s.api('GET', `/v1/executions/${id}?wait=60`)).body;
    assert.equal(
      assertGenuine(done.result).idKnown,
      !K8S,
      K8S
        ? 'a file put during the run does not reach the Pod'
        : 'the cell knew its run id: the forged exit was a real try',
    );
    const after = await run('x + 1');
    assert.deepEqual([after.result.value, after.result.interpreter_restarted], ['42', false], 'the session is intact');
    // What it wrote into its own plumbing (the interrupt pipe too) costs no later cell anything: interrupts still work.
    const slow = (
      await s.api('POST', '/v1/executions?wait=60', {
        session_id: sid,
        language: 'python',
        code: 'import time\ntime.sleep(100)',
        timeout_ms: 1500,
      })
    ).body;
    assert.deepEqual([slow.result.state, slow.result.exit_code], ['timeout', -1]);
    assert.match(slow.result.stderr, /KeyboardInterrupt/);
    assert.deepEqual(
      [(await run('x')).result.value, (await run('1')).result.interpreter_restarted],
      ['41', false],
      'interrupted, not killed',
    );
  });

  await t.test('the cell cannot signal, trace or look into any process it did not start', async () => {
    const r = await run(PROBE);
    assert.equal(r.result.state, 'completed', r.result.stderr);
    // In a Kubernetes session Pod the agent is PID 1 of the code's own uid (the Pod has no capability to switch
    // users): a signal reaches it, but as the namespace's init it gets only those it handles, never SIGKILL or
    // SIGSTOP (test/kubernetes/session-pods.test.ts sends them all and the session lives on). On Docker the agent is
    // another uid: not even a signal.
    assert.deepEqual(JSON.parse(r.result.stdout), { signal: K8S ? [1] : [], ptrace: [], fds: [], mem: [] });
    assert.equal((await run('x')).result.value, '41', 'the agent and the interpreter live on');
  });

  if (TEST_BACKEND === 'docker') {
    await t.test("no process but the init and the agent holds the container's stdio (the channel)", async () => {
      // From the host (these tests run as root), which sees every process of the container and its descriptors.
      const container = new Dockerode().getContainer((await s.sessionSandbox(sid))!);
      const init = (await container.inspect()).State.Pid;
      const top = await container.top({ ps_args: '-o pid' });
      const pids = top.Processes.map((p: string[]) => Number(p[0]));
      const fds = async (pid: number) => {
        const names = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
        const targets = await Promise.all(names.map((n) => readlink(`/proc/${pid}/fd/${n}`).catch(() => '')));
        return new Set(targets.filter((x) => x !== ''));
      };
      const stdio = [...(await fds(init))].filter((x) => x.startsWith('pipe:'));
      assert.ok(stdio.length > 0, 'the init holds the stdio pipes');
      const holders: string[] = [];
      for (const pid of pids) {
        if (pid === init) continue;
        const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'latin1').catch(() => '')).split('\0').join(' ');
        const held = [...(await fds(pid))].filter((x) => stdio.includes(x));
        if (held.length > 0) holders.push(cmdline);
      }
      assert.equal(holders.length, 1, holders.join('\n'));
      assert.match(holders[0]!, /sandgate_agent\.py/);
    });
  }
});

const runsc =
  TEST_BACKEND === 'docker' && 'runsc' in ((await new Dockerode().info()) as { Runtimes?: object }).Runtimes!;

test(
  'a stateful session under gVisor: its own interpreter, no forged result, interrupts and deaths as under runc',
  { skip: runsc ? false : 'the Docker engine has no runsc runtime (docker info)' },
  async (t) => {
    const s = await startStack({ env: { SANDGATE_RUNTIME: 'runsc' } });
    t.after(() => s.close());
    const sid = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;
    const run = async (code: string, extra: object = {}) =>
      (await s.api('POST', '/v1/executions?wait=60', { session_id: sid, language: 'python', code, ...extra })).body
        .result;
    // Under gVisor the agent is the sandbox user too (no ambient capabilities across exec): the interpreter is its
    // child, of the same uid.
    const first = await run('x = 41\nimport os\nos.getuid(), os.getppid() != 1');
    assert.deepEqual([first.state, first.value], ['completed', '(1000, True)'], first.stderr);
    assertGenuine(await run(forger(false)), 'pipes');
    const slow = await run('import time\ntime.sleep(100)', { timeout_ms: 1500 });
    assert.deepEqual([slow.state, slow.exit_code], ['timeout', -1]);
    const kept = await run('x');
    assert.deepEqual([kept.value, kept.interpreter_restarted], ['41', false]);
    const died = await run('import os\nos._exit(3)');
    assert.deepEqual([died.state, died.exit_code], ['failed', 3]);
    assert.match(died.message ?? '', /interpreter of this session died during this run/);
    const fresh = await run('"x" in globals()');
    assert.deepEqual([fresh.value, fresh.interpreter_restarted], ['False', true]);
  },
);

test("a file uploaded during a run is kept: the sandbox's unchanged copy does not overwrite it", async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const sid = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const put = (body: string) =>
    s.api('PUT', `/v1/sessions/${sid}/files/data.txt?overwrite=true`, body, { 'content-type': 'text/plain' });
  assert.equal((await put('v1\n')).status, 201);
  // The sandbox (on Kubernetes, the session Pod's workspace) gets its copy of v1.
  const first = await s.api('POST', '/v1/executions?wait=60', {
    session_id: sid,
    language: 'bash',
    code: 'cat data.txt',
  });
  assert.equal(first.body.result.stdout, 'v1\n', JSON.stringify(first.body.result));
  const run = await s.api('POST', '/v1/executions', {
    session_id: sid,
    language: 'bash',
    code: 'echo started; sleep 8; echo from-the-run > out.txt',
    timeout_ms: 60_000,
  });
  assert.equal(run.status, 202, JSON.stringify(run.body));
  // Its code has begun, so its sandbox has its files (on Kubernetes the Pod's copy of v1 was made before).
  for (;;) {
    const out = (await s.api('GET', `/v1/executions/${run.body.id}/output?stdout_offset=0`)).body;
    if (out.stdout === 'started\n') break;
    assert.equal(out.ended, false, `the run ended before the upload: ${JSON.stringify(out)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const uploaded = await put('v2, uploaded during the run\n');
  assert.equal(uploaded.status, 201, JSON.stringify(uploaded.body));
  assert.equal((await s.api('GET', `/v1/executions/${run.body.id}`)).body.state, 'running', 'uploaded during the run');
  const done = await s.api('GET', `/v1/executions/${run.body.id}?wait=60`);
  assert.equal(done.body.state, 'completed', JSON.stringify(done.body.result));
  assert.equal((await s.api('GET', `/files/${sid}/data.txt`)).body, 'v2, uploaded during the run\n');
  assert.equal((await s.api('GET', `/files/${sid}/out.txt`)).body, 'from-the-run\n');
  // The next run sees the upload.
  const next = await s.api('POST', '/v1/executions?wait=60', {
    session_id: sid,
    language: 'bash',
    code: 'cat data.txt',
  });
  assert.equal(next.body.result.stdout, 'v2, uploaded during the run\n');
});
