import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LiveSet } from '../backend.ts';
import {
  deploymentOf,
  executionOf,
  isOrphan,
  roleOf,
  MANAGED_SELECTOR,
  ownerOf,
  ownershipLabels,
  poolLabels,
  sessionLabels,
} from './labels.ts';

const labels = ownershipLabels({ execution_id: 'exec_1', session_id: 'sess_1', tenant: 't1' }, 'dep-a');
const live = (over: Partial<LiveSet> = {}): LiveSet => ({
  executions: new Set(),
  sessions: new Set(),
  workers: new Set(),
  ...over,
});

test('ownership labels name the deployment, kind, execution, session and tenant', () => {
  assert.deepEqual(labels, {
    'org.sandgate.managed': 'true',
    'org.sandgate.deployment': 'dep-a',
    'org.sandgate.kind': 'execution',
    'org.sandgate.execution': 'exec_1',
    'org.sandgate.session': 'sess_1',
    'org.sandgate.tenant': 't1',
  });
  assert.equal(MANAGED_SELECTOR, 'org.sandgate.managed=true');
  assert.equal(executionOf(labels), 'exec_1');
  assert.equal(
    ownershipLabels({ execution_id: 'e', session_id: 's', tenant: 't' })['org.sandgate.deployment'],
    'sandgate',
  );
});

test('pool and session labels name their owner', () => {
  const pool = poolLabels('dep-a', 'worker-1');
  assert.equal(roleOf(pool), 'pool');
  assert.equal(ownerOf(pool), 'worker-1');
  const session = sessionLabels({ session_id: 'sess_2', tenant: 't', generation: 3 }, 'dep-a', true);
  assert.equal(roleOf(session), 'session');
  assert.equal(ownerOf(session), 'sess_2');
  assert.equal(session['org.sandgate.generation'], '3');
  assert.equal(session['org.sandgate.replaces'], 'true');
  assert.equal(
    sessionLabels({ session_id: 's', tenant: 't', generation: 0 }, 'd', false)['org.sandgate.replaces'],
    undefined,
  );
});

test('only managed sandboxes of this deployment that nothing live owns are orphans', () => {
  assert.equal(isOrphan(labels, live({ executions: new Set(['exec_1']) }), 'dep-a'), false);
  assert.equal(isOrphan(labels, live({ executions: new Set(['exec_2']) }), 'dep-a'), true);
  assert.equal(isOrphan(labels, live(), 'dep-b'), false, 'another deployment is never touched');
  const pool = poolLabels('dep-a', 'worker-1');
  assert.equal(isOrphan(pool, live({ workers: new Set(['worker-1']) }), 'dep-a'), false);
  assert.equal(isOrphan(pool, live({ executions: new Set(['worker-1']) }), 'dep-a'), true);
  const session = sessionLabels({ session_id: 'sess_2', tenant: 't', generation: 0 }, 'dep-a', false);
  assert.equal(isOrphan(session, live({ sessions: new Set(['sess_2']) }), 'dep-a'), false);
  assert.equal(isOrphan(session, live(), 'dep-a'), true);
  assert.equal(isOrphan({ 'org.sandgate.execution': 'exec_9' }, live()), false, 'unmanaged');
  assert.equal(isOrphan({ 'org.sandgate.managed': 'true' }, live()), true, 'names no owner');
  assert.equal(isOrphan(undefined, live()), false);
});

test('sandboxes made before deployments and kinds were labelled belong to the default deployment and ran one execution', () => {
  const legacy = { 'org.sandgate.managed': 'true', 'org.sandgate.execution': 'exec_old' };
  assert.equal(deploymentOf(legacy), 'sandgate');
  assert.equal(roleOf(legacy), 'execution');
  assert.equal(isOrphan(legacy, live()), true);
  assert.equal(isOrphan(legacy, live(), 'other'), false);
});
