import { test } from 'node:test';
import assert from 'node:assert/strict';
import { executionOf, isOrphan, MANAGED_SELECTOR, ownershipLabels } from './labels.ts';

const labels = ownershipLabels({ execution_id: 'exec_1', session_id: 'sess_1', tenant: 't1' });

test('ownership labels name the execution, session and tenant', () => {
  assert.deepEqual(labels, {
    'org.sandgate.managed': 'true',
    'org.sandgate.execution': 'exec_1',
    'org.sandgate.session': 'sess_1',
    'org.sandgate.tenant': 't1',
  });
  assert.equal(MANAGED_SELECTOR, 'org.sandgate.managed=true');
  assert.equal(executionOf(labels), 'exec_1');
});

test('only managed sandboxes of executions that are not live are orphans', () => {
  assert.equal(isOrphan(labels, new Set(['exec_1'])), false);
  assert.equal(isOrphan(labels, new Set(['exec_2'])), true);
  assert.equal(isOrphan({ 'org.sandgate.execution': 'exec_9' }, new Set()), false);
  assert.equal(isOrphan({ 'org.sandgate.managed': 'true' }, new Set()), true);
  assert.equal(isOrphan(undefined, new Set()), false);
});
