import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Artifact } from '@sandgate/contracts';
import { buildResult, outcomeOf, type RunEnd } from './result.ts';

const limits = { timeout_ms: 2000, memory_mb: 64 };
const end = (over: Partial<RunEnd>): RunEnd => ({
  exitCode: 0,
  timedOut: false,
  oomKilled: false,
  cancelled: false,
  ...over,
});
const artifact: Artifact = {
  path: 'out.csv',
  filename: 'out.csv',
  size_bytes: 3,
  mime_type: 'text/csv',
  sha256: 'a'.repeat(64),
  download_url: '/files/x',
};
const parts = (e: RunEnd) => ({
  end: e,
  limits,
  artifacts: [artifact],
  durationMs: 12.6,
  stdout: { text: 'out', truncated: false },
  stderr: { text: 'err', truncated: true },
});

test('exit 0 completes and keeps the artifacts', () => {
  const r = buildResult(parts(end({})));
  assert.deepEqual(r, {
    state: 'completed',
    exit_code: 0,
    stdout: 'out',
    stderr: 'err',
    stdout_truncated: false,
    stderr_truncated: true,
    artifacts: [artifact],
    duration_ms: 13,
  });
});

test('a non-zero exit fails and reports no artifacts', () => {
  const r = buildResult(parts(end({ exitCode: 3 })));
  assert.equal(r.state, 'failed');
  assert.equal(r.exit_code, 3);
  assert.equal(r.reason, undefined);
  assert.deepEqual(r.artifacts, []);
});

test('a timeout wins over the exit status and reports -1', () => {
  const r = buildResult(parts(end({ exitCode: 137, timedOut: true, oomKilled: true })));
  assert.equal(r.state, 'timeout');
  assert.equal(r.exit_code, -1);
  assert.equal(r.reason, 'timeout');
  assert.match(r.message ?? '', /2000 ms/);
  assert.deepEqual(r.artifacts, []);
});

test('a cancel is reported as cancelled', () => {
  const o = outcomeOf(end({ exitCode: 137, cancelled: true }), limits);
  assert.equal(o.state, 'cancelled');
  assert.equal(o.reason, 'cancelled');
});

test('an OOM kill fails the run even when the program exited 0', () => {
  for (const exitCode of [137, 0]) {
    const o = outcomeOf(end({ exitCode, oomKilled: true }), limits);
    assert.equal(o.state, 'failed');
    assert.equal(o.reason, 'oom');
    assert.match(o.message ?? '', /64 MB/);
  }
});

test('a sandbox lost mid-run fails with its message, even when its exit status was 0', () => {
  for (const exitCode of [0, 1]) {
    const o = outcomeOf(end({ exitCode, lost: 'the interpreter died' }), limits);
    assert.equal(o.state, 'failed');
    assert.equal(o.exit_code, exitCode);
    assert.equal(o.reason, undefined);
    assert.equal(o.message, 'the interpreter died');
  }
  assert.equal(outcomeOf(end({ lost: 'x', oomKilled: true }), limits).reason, 'oom', 'an OOM kill says why it died');
});

test('a sandbox ended at its pids limit fails with reason pids_limit and says so', () => {
  const o = outcomeOf(end({ exitCode: 2, pidsLimit: 'too many processes' }), limits);
  assert.deepEqual(o, { state: 'failed', exit_code: 2, reason: 'pids_limit', message: 'too many processes' });
  assert.equal(outcomeOf(end({ pidsLimit: 'x', oomKilled: true }), limits).reason, 'oom', 'an OOM kill wins');
});
