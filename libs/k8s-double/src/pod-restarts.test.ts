import { test } from 'node:test';
import assert from 'node:assert/strict';
import type * as k8s from '@kubernetes/client-node';
import { DOUBLE_LABELS } from './docker-labels.ts';
import {
  failure,
  pod,
  podContainers,
  shContainer,
  startDouble,
  terminal,
  waitForEvent,
  waitForPod,
  watchFeed,
  type DoubleFixture,
  type WatchEvent,
} from './testing.ts';

const work = { volumeMounts: [{ name: 'work', mountPath: '/work' }] };
/** A script that counts its runs in the Pod's emptyDir and prints `run-<n>` before `rest`. */
const counted = (rest: string) =>
  `n=$(( $(cat /work/n 2>/dev/null || echo 0) + 1 )); echo $n > /work/n; echo run-$n; ${rest}`;

/** Watches one Pod by name from its creation: its statuses as they change, with when each arrived. */
async function podFeed(t: Parameters<typeof startDouble>[0], f: DoubleFixture, created: k8s.V1Pod) {
  const feed = await watchFeed(t, f, `/api/v1/namespaces/${f.namespace}/pods`, {
    fieldSelector: `metadata.name=${created.metadata!.name}`,
    resourceVersion: created.metadata!.resourceVersion!,
  });
  const seen: { at: number; pod: k8s.V1Pod }[] = [];
  const until = async (done: (p: k8s.V1Pod) => boolean, timeoutMs = 60_000) => {
    const events = await feed.until((e: WatchEvent) => {
      seen.push({ at: Date.now(), pod: e.object as k8s.V1Pod });
      return done(e.object as k8s.V1Pod);
    }, timeoutMs);
    return events.at(-1)!.object as k8s.V1Pod;
  };
  return { seen, until };
}

const status = (p: k8s.V1Pod, name: string) =>
  [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])].find((c) => c.name === name);

test('restartPolicy Always: each exit is run again with a doubling back-off; CrashLoopBackOff meanwhile', async (t) => {
  const f = await startDouble(t, { node: { restartBackOffMs: 1000 } });
  const created = await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('always', {
      restartPolicy: 'Always',
      volumes: [{ name: 'work', emptyDir: {} }],
      containers: [shContainer('main', counted('[ $n -ge 4 ] && sleep 300; exit 3'), work)],
    }),
  });
  const feed = await podFeed(t, f, created);
  const fourth = await feed.until((p) => !!status(p, 'main')?.state?.running && status(p, 'main')?.restartCount === 3);
  const main = status(fourth, 'main')!;
  assert.equal(fourth.status?.phase, 'Running');
  assert.equal(main.lastState?.terminated?.exitCode, 3);
  assert.equal(main.lastState?.terminated?.reason, 'Error');
  assert.notEqual(main.lastState?.terminated?.containerID, main.containerID, 'each run is a new container');

  const phases = feed.seen.map((s) => s.pod.status?.phase).filter((p, i, all) => p !== all[i - 1]);
  assert.deepEqual(phases, ['Pending', 'Running'], 'never Failed nor Succeeded while it restarts');
  const waits = feed.seen.filter((s) => status(s.pod, 'main')?.state?.waiting?.reason === 'CrashLoopBackOff');
  const messages = [...new Set(waits.map((s) => status(s.pod, 'main')!.state!.waiting!.message))];
  const podRef = `always_${f.namespace}(${created.metadata!.uid})`;
  assert.deepEqual(messages, [
    `back-off 1s restarting failed container=main pod=${podRef}`,
    `back-off 2s restarting failed container=main pod=${podRef}`,
  ]);
  // The first restart is at once; then the back-off is waited out from the exit before the next run.
  const runningAgain = (count: number) =>
    feed.seen.find((s) => status(s.pod, 'main')?.restartCount === count && status(s.pod, 'main')?.state?.running)!.at;
  const backingOff = (message: string) =>
    waits.find((s) => status(s.pod, 'main')!.state!.waiting!.message === message)!.at;
  assert.ok(runningAgain(2) - backingOff(messages[0]!) >= 800, 'waited about 1 s before the third run');
  assert.ok(runningAgain(3) - backingOff(messages[1]!) >= 1800, 'waited about 2 s before the fourth run');
  assert.ok(waits.every((s) => s.pod.status?.phase === 'Running'));

  const log = (previous: boolean) =>
    f.core.readNamespacedPodLog({ name: 'always', namespace: f.namespace, container: 'main', previous });
  // Running is when the container started, not when it has written its line: the log is read until it has.
  let current = await log(false);
  for (const deadline = Date.now() + 10_000; current === '' && Date.now() < deadline; current = await log(false)) {
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(current, 'run-4\n');
  assert.equal(await log(true), 'run-3\n', 'previous: the run before the current one');
  const backOff = await waitForEvent(f, 'involvedObject.name=always,reason=BackOff');
  assert.equal(backOff.type, 'Warning');
  assert.equal(backOff.message, `Back-off restarting failed container main in pod ${podRef}`);
  // The current run and the one before it stay; older ones are removed, as the kubelet's container GC does.
  const runs = async () =>
    (await podContainers(f.double, created.metadata!.uid!)).filter((c) => c.Labels[DOUBLE_LABELS.container] === 'main');
  for (const deadline = Date.now() + 10_000; (await runs()).length !== 2;) {
    assert.ok(Date.now() < deadline, `runs kept: ${(await runs()).length}`);
    await new Promise((r) => setTimeout(r, 100));
  }
});

test('restartPolicy OnFailure: failed runs are retried; the Pod Succeeds once every container exited 0', async (t) => {
  const f = await startDouble(t, { node: { restartBackOffMs: 200 } });
  const created = await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('on-failure', {
      restartPolicy: 'OnFailure',
      volumes: [{ name: 'work', emptyDir: {} }],
      containers: [shContainer('flaky', counted('[ $n -ge 3 ]'), work), shContainer('steady', 'echo once; sleep 0.2')],
    }),
  });
  const feed = await podFeed(t, f, created);
  const done = await feed.until(terminal);
  assert.equal(done.status?.phase, 'Succeeded');
  const phases = feed.seen.map((s) => s.pod.status?.phase).filter((p, i, all) => p !== all[i - 1]);
  assert.deepEqual(phases, ['Pending', 'Running', 'Succeeded']);
  const flaky = status(done, 'flaky')!;
  assert.equal(flaky.restartCount, 2);
  assert.equal(flaky.state?.terminated?.exitCode, 0);
  assert.equal(flaky.lastState?.terminated?.exitCode, 1);
  const steady = status(done, 'steady')!;
  assert.equal(steady.restartCount, 0, 'a container that exited 0 is not run again');
  assert.deepEqual(steady.lastState, {});

  const log = (container: string, previous: boolean) =>
    f.core.readNamespacedPodLog({ name: 'on-failure', namespace: f.namespace, container, previous });
  assert.equal(await log('flaky', false), 'run-3\n');
  assert.equal(await log('flaky', true), 'run-2\n');
  const none = await failure(log('steady', true));
  assert.equal(none.code, 400);
  assert.equal(none.message, 'previous terminated container "steady" in pod "on-failure" not found');
});

test('an init container that fails is retried under OnFailure while the Pod stays Pending', async (t) => {
  const f = await startDouble(t, { node: { restartBackOffMs: 200 } });
  const created = await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('init-retry', {
      restartPolicy: 'OnFailure',
      volumes: [{ name: 'work', emptyDir: {} }],
      initContainers: [shContainer('stage', counted('[ $n -ge 3 ]'), work)],
      containers: [shContainer('main', 'cat /work/n', work)],
    }),
  });
  const feed = await podFeed(t, f, created);
  const done = await feed.until(terminal);
  assert.equal(done.status?.phase, 'Succeeded');
  const beforeMain = feed.seen.filter((s) => !status(s.pod, 'main')?.state?.running && !terminal(s.pod));
  assert.ok(
    beforeMain.every((s) => s.pod.status?.phase === 'Pending'),
    beforeMain.map((s) => s.pod.status?.phase).join(),
  );
  const looping = feed.seen.find((s) => status(s.pod, 'stage')?.state?.waiting?.reason === 'CrashLoopBackOff');
  assert.ok(looping, 'the init container waited out a back-off');
  assert.equal(status(looping.pod, 'main')?.state?.waiting?.reason, 'PodInitializing');
  const stage = status(done, 'stage')!;
  assert.equal(stage.restartCount, 2);
  assert.equal(stage.lastState?.terminated?.exitCode, 1);
  assert.equal(stage.state?.terminated?.exitCode, 0);
  assert.equal(
    await f.core.readNamespacedPodLog({ name: 'init-retry', namespace: f.namespace, container: 'main' }),
    '3\n',
  );
});

test('activeDeadlineSeconds ends a crash-looping Pod: Failed DeadlineExceeded, nothing runs again', async (t) => {
  // The second exit starts a 30 s back-off: the deadline falls inside it, with room for two container starts on a
  // loaded machine before it.
  const f = await startDouble(t, { node: { restartBackOffMs: 30_000 } });
  const created = await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('deadline-loop', {
      restartPolicy: 'Always',
      activeDeadlineSeconds: 8,
      containers: [shContainer('main', 'echo crash; exit 1')],
    }),
  });
  const { pod: ended } = await waitForPod(f, 'deadline-loop', terminal);
  assert.equal(ended.status?.phase, 'Failed');
  assert.equal(ended.status?.reason, 'DeadlineExceeded');
  const main = status(ended, 'main')!;
  assert.equal(main.restartCount, 1, 'run once, restarted at once, then backing off');
  assert.equal(main.state?.terminated?.exitCode, 1, 'the last run stands');
  assert.equal(main.state?.terminated?.reason, 'Error');
  const engine = await podContainers(f.double, created.metadata!.uid!);
  assert.ok(
    engine.every((c) => c.State !== 'running' || c.Labels[DOUBLE_LABELS.container] === 'POD'),
    JSON.stringify(engine.map((c) => [c.Labels[DOUBLE_LABELS.container], c.State])),
  );
  const after = await f.core.readNamespacedPod({ name: 'deadline-loop', namespace: f.namespace });
  assert.equal(status(after, 'main')!.restartCount, main.restartCount, 'no restart after the Pod ended');
});
