import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chown, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ExecutionJob } from '@sandgate/contracts';
import { fixture, newSessionId, RecordingSink, SANDBOX_UID, type Fixture } from '../testing/docker.ts';

const cell = (f: Fixture, code: string, over: Partial<ExecutionJob> = {}) =>
  f.run(f.job({ sandbox: 'stateful', code, ...over }));

test('variables persist between runs and the last expression is the value', async (t) => {
  const f = await fixture(t);
  const first = await cell(f, 'x = 41');
  assert.equal(first.state, 'completed', first.stderr);
  assert.equal(first.interpreter_restarted, false, 'the first run of a session is not a restart');
  assert.equal(first.value, undefined);
  const second = await cell(f, 'print("side effect")\nx + 1');
  assert.deepEqual([second.value, second.stdout, second.interpreter_restarted], ['42', 'side effect\n', false]);
  assert.equal((await cell(f, 'None')).value, undefined, 'None is no value, as in a notebook');
  assert.equal((await cell(f, '"a" * 3')).value, "'aaa'");
});

test('a DataFrame loaded in one run is used in the next', async (t) => {
  const f = await fixture(t);
  const dir = await f.workspaces.create(f.job().session_id);
  await writeFile(join(dir, 'sales.csv'), 'region,amount\nnorth,10\nsouth,32\n');
  await chown(join(dir, 'sales.csv'), SANDBOX_UID, SANDBOX_UID);
  const load = await cell(f, "import pandas as pd\ndf = pd.read_csv('sales.csv')");
  assert.equal(load.state, 'completed', load.stderr);
  const total = await cell(f, "print(df['amount'].sum())\ndf.shape");
  assert.deepEqual([total.stdout, total.value], ['42\n', '(2, 2)']);
});

test('a run past its timeout is interrupted; the interpreter keeps its state and answers', async (t) => {
  const f = await fixture(t);
  await cell(f, 'x = 41');
  const started = performance.now();
  const sink = new RecordingSink();
  const slow = await f.run(f.job({ sandbox: 'stateful', code: 'while True:\n    pass', timeout_ms: 1000 }), sink);
  assert.equal(slow.state, 'timeout');
  assert.equal(slow.exit_code, -1);
  assert.match(slow.stderr, /KeyboardInterrupt/);
  assert.ok(performance.now() - started < 4000);
  assert.deepEqual(sink.phases, ['starting', 'running', 'harvesting']);
  const after = await cell(f, 'x');
  assert.deepEqual([after.value, after.interpreter_restarted], ['41', false]);
});

test('an interpreter that ignores the interrupt is killed; the next run says it restarted', async (t) => {
  const f = await fixture(t, { interruptGraceMs: 500 });
  await cell(f, 'x = 1');
  const stuck = await cell(f, 'import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass', {
    timeout_ms: 500,
  });
  assert.equal(stuck.state, 'timeout');
  const next = await cell(f, "'x' in globals()");
  assert.deepEqual([next.value, next.interpreter_restarted], ['False', true]);
});

test('an interpreter that dies is reported; the next run has a fresh one and says so', async (t) => {
  const f = await fixture(t);
  await cell(f, 'x = 41');
  const died = await cell(f, 'import os, sys\nprint("last words")\nsys.stderr.write("and more")\nos._exit(1)');
  assert.equal(died.state, 'failed');
  assert.deepEqual([died.stdout, died.stderr], ['last words\n', 'and more'], 'what it printed before dying is kept');
  assert.equal(died.exit_code, 1);
  assert.match(
    died.message ?? '',
    /interpreter of this session died during this run.*next run starts a fresh interpreter/,
  );
  const fresh = await cell(f, 'print("alive")');
  assert.deepEqual([fresh.stdout, fresh.interpreter_restarted], ['alive\n', true]);
  assert.match((await cell(f, 'x')).stderr, /NameError: name 'x' is not defined/);
  assert.equal((await cell(f, '1')).interpreter_restarted, false, 'only the first run after the restart');
});

test('what an interpreter printed before a segfault is kept; the next run has a fresh one', async (t) => {
  const f = await fixture(t);
  await cell(f, 'x = 1');
  const crashed = await cell(f, 'import ctypes\nprint("before the crash")\nctypes.string_at(0)');
  assert.deepEqual([crashed.state, crashed.exit_code, crashed.stdout], ['failed', 139, 'before the crash\n']);
  assert.match(crashed.message ?? '', /interpreter of this session died during this run \(exit status 139\)/);
  const fresh = await cell(f, '"x" in globals()');
  assert.deepEqual([fresh.value, fresh.interpreter_restarted], ['False', true]);
});

test('an interpreter killed for memory is reported as oom, and the next run works', async (t) => {
  const f = await fixture(t);
  const bomb = await cell(f, 'chunks = []\nwhile True:\n    chunks.append(b"\\x01" * (1 << 20))', { memory_mb: 128 });
  assert.equal(bomb.state, 'failed');
  assert.equal(bomb.reason, 'oom');
  const next = await cell(f, '2 + 2', { memory_mb: 128 });
  assert.deepEqual([next.value, next.interpreter_restarted], ['4', true]);
});

test('two sessions never share state', async (t) => {
  const f = await fixture(t);
  const other = newSessionId();
  await cell(f, 'secret = "mine"');
  const r = await cell(f, 'secret', { session_id: other });
  assert.match(r.stderr, /NameError: name 'secret' is not defined/);
  assert.equal((await cell(f, 'secret')).value, "'mine'");
});

test('plt.show() saves each open figure as a PNG artifact and closes it', async (t) => {
  const f = await fixture(t);
  const r = await cell(
    f,
    'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.figure()\nplt.bar([1], [2])\nplt.show()\nlen(plt.get_fignums())',
  );
  assert.equal(r.state, 'completed', r.stderr);
  assert.equal(r.value, '0');
  assert.deepEqual(
    r.artifacts.map((a) => [a.path, a.mime_type]),
    [
      ['figure-1.png', 'image/png'],
      ['figure-2.png', 'image/png'],
    ],
  );
  const bytes = await readFile(join(f.workspaces.dir(f.job().session_id), 'figure-1.png'));
  assert.equal(bytes.subarray(1, 4).toString(), 'PNG');
  const again = await cell(f, 'plt.plot([0, 1])\nplt.show()');
  assert.deepEqual(
    again.artifacts.map((a) => a.path),
    ['figure-3.png'],
    'numbers keep growing over the session',
  );
});

test('a generation bump gives a fresh interpreter; files stay', async (t) => {
  const f = await fixture(t);
  await cell(f, 'y = 1\nopen("kept.txt", "w").write("k")');
  const r = await cell(f, 'import os\nprint(os.path.exists("kept.txt"))\n"y" in globals()', { generation: 1 });
  assert.deepEqual([r.stdout, r.value, r.interpreter_restarted], ['True\n', 'False', true]);
});

test("env, stdin and exceptions per run; the previous run's variables go", async (t) => {
  const f = await fixture(t);
  const env = await cell(f, 'import os, sys\nprint(sys.stdin.read())\nos.environ.get("A")', {
    env: { A: 'one' },
    stdin: 'in',
  });
  assert.deepEqual([env.stdout, env.value], ['in\n', "'one'"]);
  assert.equal((await cell(f, 'os.environ.get("A")')).value, undefined);
  const err = await cell(f, 'def f():\n    raise ValueError("bad")\nf()');
  assert.equal(err.state, 'failed');
  assert.equal(err.exit_code, 1);
  assert.match(err.stderr, /line 2, in f\n {4}raise ValueError\("bad"\)\nValueError: bad\n$/);
  const exit = await cell(f, 'import sys\nsys.exit(3)');
  assert.deepEqual([exit.state, exit.exit_code], ['failed', 3]);
  assert.equal((await cell(f, '1 + 1')).value, '2', 'sys.exit ends the run, not the interpreter');
});
