import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestCase } from '@sandgate/contracts';
import { buildResult } from './result.ts';
import { TestOutputCollector, testMarker } from './test-report.ts';

const MARK = testMarker('exec_0123456789abcdef');
const report = (o: object) => `${MARK} ${JSON.stringify(o)}\n`;
const pass = (name: string) => report({ name, passed: true, skipped: false, error: null, duration_ms: 1.5 });

function collector(maxBytes = 10_000) {
  const out: string[] = [];
  const cases: TestCase[] = [];
  const c = new TestOutputCollector(
    MARK,
    (t) => out.push(t),
    (x) => cases.push(x),
    maxBytes,
  );
  return { c, out, cases };
}

test('report lines become cases and leave the output, wherever they start and however they are cut', () => {
  const { c, out, cases } = collector();
  // pytest's progress dots stay on the line a report is written after.
  const stream = Buffer.from(
    `collected 2\n.${pass('test_a')}F${report({ name: 'test_b', passed: false, skipped: false, error: 'assert 1 == 2', duration_ms: 2 })}\nsummary\n${report({ summary: { total: 2, passed: 1, failed: 1, skipped: 0 }, errors: [] })}`,
  );
  // Fed a byte at a time: every split of a marker and of a line.
  for (let i = 0; i < stream.length; i++) c.write(stream.subarray(i, i + 1));
  c.end();
  assert.equal(out.join(''), 'collected 2\n.F\nsummary\n');
  assert.equal(c.text, 'collected 2\n.F\nsummary\n');
  assert.deepEqual(
    cases.map((x) => [x.name, x.passed, x.error]),
    [
      ['test_a', true, null],
      ['test_b', false, 'assert 1 == 2'],
    ],
  );
  assert.deepEqual(c.report().summary, { total: 2, passed: 1, failed: 1, skipped: 0 });
  assert.equal(c.notRun(''), undefined);
});

test('what only looks like a report is output: another marker, broken JSON, a line never ended', () => {
  const { c, cases } = collector();
  const other = testMarker('exec_ffffffffffffffff');
  c.write(
    Buffer.from(`${other} {"name":"forged","passed":true}\n${MARK} {not json\n${MARK} {"name":"x"}\n${MARK} {"name":`),
  );
  c.end();
  assert.deepEqual(cases, []);
  assert.equal(
    c.text,
    `${other} {"name":"forged","passed":true}\n${MARK} {not json\n${MARK} {"name":"x"}\n${MARK} {"name":`,
  );
});

test('without the summary line the cases are counted; no test at all is a run whose tests did not run', () => {
  const { c } = collector();
  c.write(Buffer.from(pass('a') + pass('b')));
  c.end();
  assert.deepEqual(c.report().summary, { total: 2, passed: 2, failed: 0, skipped: 0 });
  const none = collector().c;
  none.write(
    Buffer.from(report({ summary: { total: 0, passed: 0, failed: 0, skipped: 0 }, errors: ['SyntaxError: x'] })),
  );
  none.end();
  assert.equal(none.notRun('ignored'), 'The tests did not run: SyntaxError: x');
  const silent = collector().c;
  silent.end();
  assert.match(silent.notRun('SyntaxError: Unexpected token') ?? '', /did not run: SyntaxError: Unexpected token/);
  const end = { exitCode: 1, timedOut: false, oomKilled: false, cancelled: false };
  const limits = { timeout_ms: 1000, memory_mb: 128 };
  const stderr = { text: 'SyntaxError: Unexpected token', truncated: false };
  const r = buildResult({ end, limits, stdout: silent, stderr, artifacts: [], durationMs: 5, tests: silent });
  assert.deepEqual([r.state, r.reason], ['error', 'tests_not_run']);
  assert.deepEqual(r.tests, { summary: { total: 0, passed: 0, failed: 0, skipped: 0 }, results: [] });
  // A timeout stays a timeout, whatever ran.
  const late = buildResult({
    end: { ...end, timedOut: true },
    limits,
    stdout: silent,
    stderr,
    artifacts: [],
    durationMs: 5,
    tests: silent,
  });
  assert.equal(late.state, 'timeout');
});

test('at most 1000 cases are listed; the summary counts them all', () => {
  const { c, cases } = collector(1000);
  for (let i = 0; i < 1005; i++) c.write(Buffer.from(pass(`t${i}`)));
  c.end();
  assert.equal(cases.length, 1005, 'every one is an event');
  const r = c.report();
  assert.equal(r.results.length, 1000);
  assert.equal(r.results_truncated, true);
  assert.equal(r.summary.total, 1005);
  assert.equal(c.text, '', 'reports are not output, and do not count against its cap');
});
