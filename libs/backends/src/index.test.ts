import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as backends from './index.ts';
import * as testing from './testing/index.ts';

test('the package entry holds the seam and the backends apps build, nothing of their insides', () => {
  // Types leave no trace at run time: these are every value the entry exports.
  assert.deepEqual(Object.keys(backends).sort(), ['CAPABILITIES', 'DockerBackend', 'TemplateBuildError']);
  assert.equal(typeof backends.DockerBackend, 'function');
  // The seam's buildTemplate rejects with it when a recipe does not build.
  assert.ok(new backends.TemplateBuildError('the setup command failed') instanceof Error);
  assert.deepEqual(Object.keys(backends.CAPABILITIES).sort(), ['docker', 'kubernetes']);
});

test('the testing entry holds the backend contract and the names tests look for', () => {
  assert.equal(typeof testing.describeBackendContract, 'function');
  const sink = new testing.RecordingSink();
  sink.phase('running');
  sink.stdout('a');
  assert.deepEqual([sink.phases, sink.stdoutChunks], [['running'], ['a']]);
  assert.equal(testing.MANAGED_SELECTOR, `${testing.LABELS.managed}=true`);
});
