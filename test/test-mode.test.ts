import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, type Stack } from './harness.ts';
import { readSse } from './sse-client.ts';

/**
 * mode "test": tests run against code with the language's usual framework (pytest, node:test), each test a
 * `test_result` event as it ends and an entry of the result's `tests`; the console output stays the output. On every
 * backend the suite runs on.
 */

const create = async (s: Stack, body: Record<string, unknown>, wait = 60) =>
  s.api('POST', `/v1/executions${wait > 0 ? `?wait=${wait}` : ''}`, { mode: 'test', ...body });

const result = async (s: Stack, body: Record<string, unknown>) => {
  const res = await create(s, body);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.result as Record<string, any>;
};

const PY_CODE = 'def add(a, b):\n    return a + b\n';
const PY_TESTS = [
  'import pytest',
  'from main import add',
  '',
  'def test_adds():',
  '    assert add(1, 2) == 3',
  '',
  'def test_reads_the_session():',
  '    assert open("numbers.txt").read().split() == ["1", "2"]',
  '',
  'def test_wrong():',
  '    print("seen only as the failure\'s captured output")',
  '    assert add(1, 1) == 3, "one and one"',
  '',
  '@pytest.mark.skip(reason="not yet")',
  'def test_later():',
  '    pass',
  '',
  'class TestCart:',
  '    def test_in_a_class(self):',
  '        assert add(0, 0) == 0',
].join('\n');

test('test mode: pytest, node:test and TypeScript, with structured results and an event per test', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const session = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const up = await s.api('PUT', `/v1/sessions/${session}/files/numbers.txt`, '1 2\n', { 'content-type': 'text/plain' });
  assert.equal(up.status, 201);

  await t.test('python: each test, its outcome, assertion message and time; a failure fails the run', async () => {
    const r = await result(s, { language: 'python', session_id: session, code: PY_CODE, tests: PY_TESTS });
    assert.equal(r.state, 'failed', JSON.stringify(r));
    assert.equal(r.exit_code, 1);
    assert.deepEqual(r.tests.summary, { total: 5, passed: 3, failed: 1, skipped: 1 });
    const by = Object.fromEntries(r.tests.results.map((c: any) => [c.name, c]));
    assert.deepEqual(Object.keys(by).sort(), [
      'TestCart::test_in_a_class',
      'test_adds',
      'test_later',
      'test_reads_the_session',
      'test_wrong',
    ]);
    assert.equal(by.test_adds.passed, true);
    assert.equal(by.test_adds.error, null);
    assert.equal(typeof by.test_adds.duration_ms, 'number');
    assert.equal(by.test_reads_the_session.passed, true, 'the working directory is the session');
    assert.equal(by.test_wrong.passed, false);
    assert.match(by.test_wrong.error, /one and one/);
    assert.deepEqual([by.test_later.skipped, by.test_later.error], [true, 'Skipped: not yet']);
    // The console output is pytest's own, without the report lines.
    assert.match(r.stdout, /1 failed, 3 passed, 1 skipped/);
    assert.match(r.stdout, /seen only as the failure's captured output/);
    assert.ok(!r.stdout.includes('\x1esandgate-test:'), 'no report line is left in the output');
  });

  await t.test('all passing completes; the events carry each test as it ends, before the result', async () => {
    const created = await create(
      s,
      {
        language: 'python',
        code: PY_CODE,
        tests: 'from main import add\n\ndef test_a():\n    assert add(2, 2) == 4\n',
      },
      0,
    );
    assert.equal(created.status, 202);
    const { events } = await readSse(created.body.links.events);
    const types = events.map((e) => e.event);
    const at = types.indexOf('test_result');
    assert.ok(at >= 0 && at < types.indexOf('result'), types.join(' '));
    assert.deepEqual(
      events.filter((e) => e.event === 'test_result').map((e) => JSON.parse(e.data).name),
      ['test_a'],
    );
    const done = JSON.parse(events.at(-1)!.data).result;
    assert.equal(done.state, 'completed');
    assert.deepEqual(done.tests.summary, { total: 1, passed: 1, failed: 0, skipped: 0 });
  });

  await t.test('a syntax error before any test runs is an error, with the line, not zero tests', async () => {
    const r = await result(s, {
      language: 'python',
      code: 'def add(a, b)\n    return a + b\n',
      tests: 'from main import add\n\ndef test_a():\n    assert add(1, 2) == 3\n',
    });
    assert.equal(r.state, 'error', JSON.stringify(r));
    assert.equal(r.reason, 'tests_not_run');
    assert.match(r.message, /SyntaxError/);
    assert.match(r.message, /line 1/);
    assert.deepEqual(r.tests.summary, { total: 0, passed: 0, failed: 0, skipped: 0 });
    const js = await result(s, {
      language: 'javascript',
      code: 'export const add = (a, b) => a +;\n',
      tests: "import test from 'node:test';\nimport { add } from './main.js';\ntest('a', () => {});\n",
    });
    assert.deepEqual([js.state, js.reason], ['error', 'tests_not_run']);
    assert.match(js.message, /SyntaxError/);
  });

  await t.test('javascript with node:test: suites name their tests; skip reasons are kept', async () => {
    const r = await result(s, {
      language: 'javascript',
      code: 'export const add = (a, b) => a + b;\n',
      tests: [
        "import test, { describe, it } from 'node:test';",
        "import assert from 'node:assert/strict';",
        "import { add } from './main.js';",
        "test('adds', () => assert.equal(add(1, 2), 3));",
        "test('fails', () => assert.equal(add(1, 1), 3));",
        "test('later', { skip: 'not yet' }, () => {});",
        "describe('math', () => { it('nests', () => assert.ok(add(0, 0) === 0)); });",
      ].join('\n'),
    });
    assert.equal(r.state, 'failed');
    assert.deepEqual(r.tests.summary, { total: 4, passed: 2, failed: 1, skipped: 1 });
    const by = Object.fromEntries(r.tests.results.map((c: any) => [c.name, c]));
    assert.deepEqual(Object.keys(by).sort(), ['adds', 'fails', 'later', 'math > nests']);
    assert.match(by.fails.error, /2 !== 3/);
    assert.deepEqual([by.later.skipped, by.later.error], [true, 'not yet']);
    assert.match(r.stdout, /ℹ tests 4/, "node's own report is the output");
  });

  await t.test("typescript: the tests import ./main; a failure's stack points at the .ts line", async () => {
    const r = await result(s, {
      language: 'typescript',
      code: 'export function add(a: number, b: number): number {\n  return a + b;\n}\n',
      tests: [
        "import test from 'node:test';",
        "import assert from 'node:assert/strict';",
        "import { add } from './main';",
        "test('adds', () => assert.equal(add(1, 2), 3));",
        "test('throws', () => { throw new Error('boom'); });",
      ].join('\n'),
    });
    assert.equal(r.state, 'failed', JSON.stringify(r));
    assert.deepEqual(r.tests.summary, { total: 2, passed: 1, failed: 1, skipped: 0 });
    assert.equal(r.tests.results.find((c: any) => c.name === 'throws').error, 'boom');
    assert.match(r.stdout, /main\.test\.ts:5:/);
  });

  await t.test('bad requests get a clear error', async () => {
    const cases: [Record<string, unknown>, number, string][] = [
      [{ language: 'bash', code: 'true', tests: 'x' }, 400, 'unsupported_language'],
      [{ language: 'python', code: 'x = 1' }, 400, 'validation_failed'],
      [{ language: 'python', code: 'x = 1', tests: 'x', args: ['a'] }, 400, 'validation_failed'],
      [{ language: 'python', code: 'x = 1', tests: 'x'.repeat(200_000) }, 413, 'payload_too_large'],
      [{ mode: 'run', language: 'python', code: 'x = 1', tests: 'x' }, 400, 'validation_failed'],
    ];
    for (const [body, status, code] of cases) {
      const res = await create(s, body, 0);
      assert.deepEqual([res.status, res.body.code], [status, code], JSON.stringify(body).slice(0, 120));
    }
  });
});
