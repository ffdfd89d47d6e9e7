import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomHex } from './random-ids.ts';
import { newExecutionId } from './executions.ts';
import { newSessionId } from './sessions.ts';

test('ids are hex of the asked length and never repeat, across pool refills', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 5000; i++) {
    const hex = randomHex(8);
    assert.match(hex, /^[0-9a-f]{16}$/);
    seen.add(hex);
  }
  assert.equal(seen.size, 5000);
  assert.match(newExecutionId(), /^exec_[0-9a-f]{16}$/);
  assert.match(newSessionId(), /^sess_[0-9a-f]{12}$/);
});
