import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyEvent, emptyRunView, streamText, type RunView } from './run-view.ts';

const artifact = (path: string, sha = 'a'.repeat(64)) => ({
  path,
  filename: path,
  size_bytes: 3,
  mime_type: 'image/png',
  sha256: sha,
  download_url: `http://x/files/s/${path}?sig=1`,
});
const fold = (events: [string, unknown][]): RunView =>
  events.reduce(
    (v, [event, data], i) => applyEvent(v, { id: `1-${i}`, event, data: JSON.stringify(data) }),
    emptyRunView(),
  );

test('output keeps arrival order across streams and joins chunks of one stream (an ANSI code may be split)', () => {
  const v = fold([
    ['stdout', { text: 'a\x1b[3' }],
    ['stdout', { text: '1mred\x1b[0m\n' }],
    ['stderr', { text: 'warn\n' }],
    ['stdout', { text: 'b\n' }],
  ]);
  assert.deepEqual(v.output, [
    { stream: 'stdout', text: 'a\x1b[31mred\x1b[0m\n' },
    { stream: 'stderr', text: 'warn\n' },
    { stream: 'stdout', text: 'b\n' },
  ]);
  assert.equal(streamText(v, 'stdout'), 'a\x1b[31mred\x1b[0m\nb\n');
  assert.equal(v.lastEventId, '1-3');
});

test("phases are a timeline; artifacts are listed once each, and the result's list wins", () => {
  const result = {
    state: 'completed',
    exit_code: 0,
    stdout: '',
    stderr: '',
    stdout_truncated: false,
    stderr_truncated: false,
    artifacts: [artifact('a.png', 'b'.repeat(64)), artifact('c.csv')],
    duration_ms: 5,
  };
  const v = fold([
    ['phase', { phase: 'queued', at: '2026-01-01T00:00:00.000Z' }],
    ['phase', { phase: 'running', at: '2026-01-01T00:00:01.000Z' }],
    ['artifact', { artifact: artifact('a.png') }],
    ['artifact', { artifact: artifact('a.png') }],
    ['result', { result }],
  ]);
  assert.deepEqual(
    v.phases.map((p) => p.phase),
    ['queued', 'running'],
  );
  assert.deepEqual(
    v.artifacts.map((a) => [a.path, a.sha256[0]]),
    [
      ['a.png', 'b'],
      ['c.csv', 'a'],
    ],
  );
  assert.equal(v.result?.state, 'completed');
});

test('folding never changes the view it was given (what a render holds stays as it was)', () => {
  const before = fold([['stdout', { text: 'x' }]]);
  const copy = structuredClone(before);
  applyEvent(before, { id: '2-0', event: 'stdout', data: JSON.stringify({ text: 'y' }) });
  assert.deepEqual(before, copy);
});

test("test mode: each test_result is listed as it ends; the result's full list replaces them", () => {
  const test = (name: string, passed: boolean) => ({
    name,
    passed,
    skipped: false,
    error: passed ? null : 'no',
    duration_ms: 1,
  });
  const live = fold([
    ['test_result', test('a', true)],
    ['test_result', test('b', false)],
  ]);
  assert.deepEqual(
    live.tests.map((t) => [t.name, t.passed]),
    [
      ['a', true],
      ['b', false],
    ],
  );
  const result = {
    state: 'failed',
    exit_code: 1,
    stdout: '',
    stderr: '',
    stdout_truncated: false,
    stderr_truncated: false,
    artifacts: [],
    duration_ms: 5,
    tests: {
      summary: { total: 3, passed: 2, failed: 1, skipped: 0 },
      results: [test('a', true), test('b', false), test('c', true)],
    },
  };
  const ended = applyEvent(live, { id: '1-9', event: 'result', data: JSON.stringify({ result }) });
  assert.deepEqual(
    ended.tests.map((t) => t.name),
    ['a', 'b', 'c'],
  );
});
