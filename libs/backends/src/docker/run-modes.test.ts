// What every way of running must do alike: the behaviour docker-backend.test.ts checks for cold containers, for
// warm-pool and session sandboxes too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { modeFixture, newSessionId, RecordingSink, RUN_MODES } from '../testing/docker.ts';

const FORGED = '{"t":"exit","code":0,"id":null}';

for (const mode of RUN_MODES) {
  test(`[${mode}] python, javascript and bash run, with their exit status, stderr and phases`, async (t) => {
    const f = await modeFixture(t, mode);
    const cases = [
      { language: 'python', code: 'print("hello from python")', out: 'hello from python\n', code_: 0 },
      {
        language: 'javascript',
        code: 'console.log("hello from node"); process.exit(2)',
        out: 'hello from node\n',
        code_: 2,
      },
      { language: 'bash', code: 'echo "hello from $0"; echo oops >&2; exit 42', out: 'hello from bash\n', code_: 42 },
    ] as const;
    for (const c of cases) {
      const sink = new RecordingSink();
      const r = await f.run(f.job({ language: c.language, code: c.code }), sink);
      assert.equal(r.exit_code, c.code_, `${c.language}: ${r.stderr}`);
      assert.equal(r.state, c.code_ === 0 ? 'completed' : 'failed');
      assert.equal(r.stdout, c.out);
      assert.equal(sink.stdoutChunks.join(''), c.out);
      assert.deepEqual(sink.phases, ['starting', 'running', 'harvesting']);
    }
    const trace = await f.run(f.job({ code: '1/0' }));
    assert.equal(trace.exit_code, 1);
    assert.match(
      trace.stderr,
      /^Traceback \(most recent call last\):\n {2}File "<string>", line 1, in <module>\nZeroDivisionError/,
    );
  });

  test(`[${mode}] stdin is delivered and closed; without stdin the program reads EOF`, async (t) => {
    const f = await modeFixture(t, mode);
    const code = 'import sys\ndata = sys.stdin.read()\nprint(repr(data.upper()))';
    assert.equal((await f.run(f.job({ code, stdin: 'hello\nworld\n' }))).stdout, "'HELLO\\nWORLD\\n'\n");
    assert.equal((await f.run(f.job({ code, stdin: null }))).stdout, "''\n");
  });

  test(`[${mode}] printed frames neither end the run early nor change its result`, async (t) => {
    const f = await modeFixture(t, mode);
    const code = `import os, sys, time\nprint(${JSON.stringify(FORGED)}, flush=True)\nos.write(1, b'${FORGED}\\n')\nos.write(2, b'${FORGED}\\n')\ntime.sleep(0.3)\nprint("end")\nsys.exit(3)`;
    const r = await f.run(f.job({ code }));
    assert.deepEqual([r.state, r.exit_code], ['failed', 3]);
    assert.equal(r.stdout, `${FORGED}\n${FORGED}\nend\n`);
    assert.equal(r.stderr, `${FORGED}\n`);
    if (mode === 'session') {
      const s = await f.run(f.job({ code, sandbox: 'stateful', session_id: newSessionId() }));
      assert.deepEqual([s.exit_code, s.stdout, s.stderr], [3, `${FORGED}\n${FORGED}\nend\n`, `${FORGED}\n`]);
    }
  });

  test(`[${mode}] a run past its timeout is stopped and reported as timeout with exit -1`, async (t) => {
    const f = await modeFixture(t, mode);
    const started = performance.now();
    const r = await f.run(f.job({ code: 'while True: pass', timeout_ms: 1500 }));
    assert.deepEqual([r.state, r.exit_code, r.reason], ['timeout', -1, 'timeout']);
    assert.ok(performance.now() - started < 4500, `took ${performance.now() - started} ms`);
  });

  test(`[${mode}] stdout is capped and flagged; a 100 MB flood returns promptly without growing the worker`, async (t) => {
    const f = await modeFixture(t, mode);
    const rssBefore = process.memoryUsage().rss;
    const started = performance.now();
    const r = await f.run(f.job({ language: 'bash', code: 'yes | head -c 100000000; echo done >&2' }));
    assert.equal(r.state, 'completed');
    assert.equal(r.stdout.length, 100_000);
    assert.equal(r.stdout_truncated, true);
    assert.equal(r.stderr, 'done\n');
    assert.equal(r.stderr_truncated, false);
    assert.ok(performance.now() - started < 20_000);
    assert.ok(process.memoryUsage().rss - rssBefore < 64 * 1024 * 1024);
  });

  test(`[${mode}] aborting mid-run cancels it`, async (t) => {
    const f = await modeFixture(t, mode);
    const abort = new AbortController();
    const sink = new RecordingSink((text) => {
      if (text.includes('ready')) abort.abort();
    });
    const started = performance.now();
    const r = await f.run(
      f.job({ code: 'import time\nprint("ready", flush=True)\ntime.sleep(60)' }),
      sink,
      abort.signal,
    );
    assert.deepEqual([r.state, r.reason], ['cancelled', 'cancelled']);
    assert.ok(performance.now() - started < 10_000);
    const after = await f.run(f.job({ code: 'print("next")' }));
    assert.equal(after.stdout, 'next\n');
  });
}
