import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PodStatusModel, qosClassOf, type ContainerRecord } from './pod-status.ts';

const rec = (name: string, init = false): ContainerRecord => ({
  name,
  image: 'i',
  init,
  state: { waiting: { reason: 'PodInitializing' } },
});
const done = (r: ContainerRecord, exitCode: number) => {
  r.state = { terminated: { exitCode, reason: exitCode ? 'Error' : 'Completed' } };
};
const run = (r: ContainerRecord) => {
  r.state = { running: { startedAt: '2026-01-01T00:00:00Z' } };
};

test('phase follows the kubelet for restartPolicy Never: init first, any waiting container keeps Pending', () => {
  const stage = rec('stage', true);
  const [runner, harvest] = [rec('runner'), rec('harvest')];
  const m = new PodStatusModel([stage], [runner, harvest], 'BestEffort');
  m.scheduled = { ok: true, at: '2026-01-01T00:00:00Z' };
  m.recompute();
  assert.equal(m.phase, 'Pending');
  done(stage, 0);
  run(harvest);
  m.recompute();
  assert.equal(m.phase, 'Pending', 'the runner is still waiting (an image pull, say)');
  run(runner);
  m.recompute();
  assert.equal(m.phase, 'Running');
  done(runner, 0);
  m.recompute();
  assert.equal(m.phase, 'Running', 'harvest still runs');
  done(harvest, 0);
  m.recompute();
  assert.equal(m.phase, 'Succeeded');
  run(harvest);
  m.recompute();
  assert.equal(m.phase, 'Succeeded', 'a terminal phase never changes');
  const ready = (m.toJSON().conditions as { type: string; reason?: string }[]).find((c) => c.type === 'Ready');
  assert.equal(ready?.reason, 'PodCompleted');
});

test('a failed init container or a non-zero container fails the Pod; a Pod-level reason wins', () => {
  const stage = rec('stage', true);
  const m1 = new PodStatusModel([stage], [rec('runner')], 'BestEffort');
  done(stage, 1);
  m1.recompute();
  assert.equal(m1.phase, 'Failed');
  const runner = rec('runner');
  const m2 = new PodStatusModel([], [runner], 'BestEffort');
  done(runner, 2);
  m2.recompute();
  assert.equal(m2.phase, 'Failed');
  const m3 = new PodStatusModel([], [rec('runner')], 'BestEffort');
  m3.fail('Evicted', 'Usage of EmptyDir volume "w" exceeds the limit "1Mi". ');
  assert.deepEqual([m3.toJSON().phase, m3.toJSON().reason], ['Failed', 'Evicted']);
});

test('under OnFailure and Always a container waiting to run again counts as stopped; the Pod stays Running', () => {
  const crashLoop = (r: ContainerRecord, exitCode: number) => {
    r.lastState = { terminated: { exitCode, reason: exitCode ? 'Error' : 'Completed' } };
    r.state = { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 10s restarting failed container' } };
  };
  const [a, b] = [rec('a'), rec('b')];
  const always = new PodStatusModel([], [a], 'BestEffort', 'Always');
  crashLoop(a, 0);
  always.recompute();
  assert.equal(always.phase, 'Running', 'Always: a container that completed runs again');
  const onFailure = new PodStatusModel([], [b], 'BestEffort', 'OnFailure');
  crashLoop(b, 1);
  onFailure.recompute();
  assert.equal(onFailure.phase, 'Running');
  done(b, 0);
  onFailure.recompute();
  assert.equal(onFailure.phase, 'Succeeded', 'OnFailure: every container exited 0');

  const stage = rec('stage', true);
  const pending = new PodStatusModel([stage], [rec('runner')], 'BestEffort', 'OnFailure');
  pending.startTime = '2026-01-01T00:00:00Z';
  crashLoop(stage, 2);
  pending.recompute();
  assert.equal(pending.phase, 'Pending', 'a failed init container is retried, not the end of the Pod');
  const [initStatus] = pending.toJSON().initContainerStatuses as { lastState: unknown; state: unknown }[];
  assert.deepEqual(initStatus!.lastState, { terminated: { exitCode: 2, reason: 'Error' } });
});

test('unscheduled: only PodScheduled False, no statuses or startTime', () => {
  const m = new PodStatusModel([], [rec('runner')], 'BestEffort');
  m.scheduled = { ok: false, reason: 'Unschedulable', message: '0/1 nodes are available', at: '2026-01-01T00:00:00Z' };
  const s = m.toJSON();
  assert.deepEqual(
    (s.conditions as { type: string; status: string }[]).map((c) => [c.type, c.status]),
    [['PodScheduled', 'False']],
  );
  assert.equal(s.containerStatuses, undefined);
  assert.equal(s.startTime, undefined);
});

test('QoS class: Guaranteed when requests equal limits for cpu and memory, BestEffort with none', () => {
  assert.equal(qosClassOf([{ resources: { limits: { cpu: '1', memory: '1Gi' } } }]), 'Guaranteed');
  assert.equal(
    qosClassOf([{ resources: { limits: { cpu: '1', memory: '1Gi' }, requests: { cpu: '500m' } } }]),
    'Burstable',
  );
  assert.equal(qosClassOf([{ resources: { limits: { memory: '1Gi' } } }]), 'Burstable');
  assert.equal(qosClassOf([{}, { resources: {} }]), 'BestEffort');
});
