import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as backends from './index.ts';

test('the package exposes the Docker backend and the shared pieces a second backend reuses', () => {
  for (const name of [
    'DockerBackend',
    'OutputCollector',
    'snapshot',
    'collectArtifacts',
    'buildResult',
    'outcomeOf',
    'ownershipLabels',
    'poolLabels',
    'sessionLabels',
    'isOrphan',
    'MANAGED_SELECTOR',
    'DEFAULT_DEPLOYMENT',
    'silentLogger',
  ] as const) {
    assert.ok(name in backends, name);
  }
  assert.doesNotThrow(() => backends.silentLogger.info({ a: 1 }, 'nothing'));
});
