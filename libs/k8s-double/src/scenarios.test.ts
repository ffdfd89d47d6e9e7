import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  failure,
  pod,
  podContainers,
  shContainer,
  startDouble,
  terminal,
  waitForEvent,
  waitForPod,
} from './testing.ts';

const sleeper = (name: string, grace = 0) =>
  pod(name, { terminationGracePeriodSeconds: grace, containers: [shContainer('runner', 'echo up; sleep 300')] });

test('a graceful delete lingers with deletionTimestamp; a create under its name is 409; then 404', async (t) => {
  const f = await startDouble(t);
  await f.core.createNamespacedPod({ namespace: f.namespace, body: sleeper('grace-1', 2) });
  await waitForPod(f, 'grace-1', (p) => p.status?.phase === 'Running');
  const started = Date.now();
  const deleted = await f.core.deleteNamespacedPod({ name: 'grace-1', namespace: f.namespace });
  assert.ok(deleted.metadata?.deletionTimestamp);
  assert.equal(deleted.metadata?.deletionGracePeriodSeconds, 2);
  const lingering = await f.core.readNamespacedPod({ name: 'grace-1', namespace: f.namespace });
  assert.ok(lingering.metadata?.deletionTimestamp, 'still there, marked for deletion');
  const dup = await failure(f.core.createNamespacedPod({ namespace: f.namespace, body: sleeper('grace-1') }));
  assert.equal(dup.code, 409);
  assert.equal(dup.reason, 'AlreadyExists');
  const again = await f.core.deleteNamespacedPod({ name: 'grace-1', namespace: f.namespace });
  assert.equal(again.metadata?.uid, deleted.metadata?.uid, 'a second delete while it lingers answers the same object');
  for (;;) {
    const gone = await f.core.readNamespacedPod({ name: 'grace-1', namespace: f.namespace }).then(
      () => false,
      (e) => e.code === 404,
    );
    if (gone) break;
    assert.ok(Date.now() - started < 15_000, 'the Pod should go after its grace period');
    await new Promise((r) => setTimeout(r, 100));
  }
  // sleep as PID 1 ignores SIGTERM: the kubelet waited out the grace period, then killed it.
  assert.ok(Date.now() - started >= 1900, `gone after ${Date.now() - started} ms`);
  assert.equal((await failure(f.core.deleteNamespacedPod({ name: 'grace-1', namespace: f.namespace }))).code, 404);
});

test('ownerReferences: a Secret owned by a Pod goes with it; one whose owner never existed is collected', async (t) => {
  const f = await startDouble(t, { orphanGraceMs: 200 });
  const p = await f.core.createNamespacedPod({ namespace: f.namespace, body: sleeper('owner-1') });
  const owner = { apiVersion: 'v1', kind: 'Pod', name: 'owner-1', uid: p.metadata!.uid!, controller: false };
  await f.core.createNamespacedSecret({
    namespace: f.namespace,
    body: { metadata: { name: 'owner-1-spec', ownerReferences: [owner] }, stringData: { a: 'b' } },
  });
  await f.core.createNamespacedSecret({
    namespace: f.namespace,
    body: {
      metadata: { name: 'dangling', ownerReferences: [{ ...owner, uid: '00000000-0000-0000-0000-000000000000' }] },
    },
  });
  await f.core.createNamespacedSecret({ namespace: f.namespace, body: { metadata: { name: 'unowned' } } });
  await f.core.deleteNamespacedPod({ name: 'owner-1', namespace: f.namespace, gracePeriodSeconds: 0 });
  assert.equal(
    (await failure(f.core.readNamespacedSecret({ name: 'owner-1-spec', namespace: f.namespace }))).code,
    404,
  );
  const deadline = Date.now() + 5000;
  while (
    (await f.core.listNamespacedSecret({ namespace: f.namespace })).items.some((s) => s.metadata?.name === 'dangling')
  ) {
    assert.ok(Date.now() < deadline, 'the dangling Secret should be collected');
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.deepEqual(
    (await f.core.listNamespacedSecret({ namespace: f.namespace })).items.map((s) => s.metadata?.name),
    ['unowned'],
  );
});

test('unschedulable, then scheduled: PodScheduled False, a FailedScheduling event, then it runs', async (t) => {
  const f = await startDouble(t, { node: { retryMs: 200 } });
  const hold = f.double.scenarios.unschedulable('sched-1');
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('sched-1', { containers: [shContainer('runner', 'echo ran')] }),
  });
  const pending = await waitForPod(f, 'sched-1', (p) => p.status?.conditions?.[0]?.reason === 'Unschedulable');
  assert.equal(pending.pod.status?.phase, 'Pending');
  assert.equal(pending.pod.spec?.nodeName, undefined);
  assert.equal(pending.pod.status?.startTime, undefined);
  assert.match(pending.pod.status?.conditions?.[0]?.message ?? '', /^0\/1 nodes are available: 1 Insufficient memory/);
  assert.equal(
    (await waitForEvent(f, 'involvedObject.name=sched-1,reason=FailedScheduling')).source?.component,
    'default-scheduler',
  );
  hold.release();
  const { pod: p } = await waitForPod(f, 'sched-1', terminal);
  assert.equal(p.status?.phase, 'Succeeded');
  assert.equal(p.spec?.nodeName, 'k8s-double-node');
});

test('node lost: status frozen at Running, pods/log 500; node shutdown: Failed, reason Terminated', async (t) => {
  const f = await startDouble(t);
  await f.core.createNamespacedPod({ namespace: f.namespace, body: sleeper('lost-1') });
  await f.core.createNamespacedPod({ namespace: f.namespace, body: sleeper('shut-1') });
  await waitForPod(f, 'lost-1', (p) => p.status?.phase === 'Running');
  await waitForPod(f, 'shut-1', (p) => p.status?.phase === 'Running');
  const before = await f.core.readNamespacedPod({ name: 'lost-1', namespace: f.namespace });
  await f.double.loseNode(f.namespace, 'lost-1');
  const after = await f.core.readNamespacedPod({ name: 'lost-1', namespace: f.namespace });
  assert.equal(after.status?.phase, 'Running');
  assert.equal(after.metadata?.resourceVersion, before.metadata?.resourceVersion);
  const log = await failure(f.core.readNamespacedPodLog({ name: 'lost-1', namespace: f.namespace }));
  assert.equal(log.code, 500);
  assert.match(log.message, /containerLogs\/.*\/lost-1\/runner.*no route to host/);
  await f.double.shutdownNode(f.namespace, 'shut-1');
  const shut = await f.core.readNamespacedPod({ name: 'shut-1', namespace: f.namespace });
  assert.equal(shut.status?.phase, 'Failed');
  assert.equal(shut.status?.reason, 'Terminated');
  assert.equal(shut.status?.containerStatuses?.[0]?.state?.terminated?.exitCode, 137);
});

test('log rotation serves the new file only; log lag holds back new lines; external delete is 404', async (t) => {
  const f = await startDouble(t);
  const mount = [{ name: 'sig', mountPath: '/sig' }];
  const created = await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('logs-2', {
      volumes: [{ name: 'sig', emptyDir: {} }],
      containers: [
        shContainer('runner', 'echo before; while [ ! -e /sig/go ]; do sleep 0.05; done; echo after; sleep 300', {
          volumeMounts: mount,
        }),
      ],
    }),
  });
  await waitForPod(f, 'logs-2', (p) => p.status?.phase === 'Running');
  const read = () => f.core.readNamespacedPodLog({ name: 'logs-2', namespace: f.namespace });
  for (let i = 0; (await read()) !== 'before\n'; i++) {
    assert.ok(i < 100, 'the first line should appear');
    await new Promise((r) => setTimeout(r, 50));
  }
  f.double.rotateLogs(f.namespace, 'logs-2', 'runner');
  assert.equal(await read(), '', 'the log shrank: the old file is no longer served');

  f.double.scenarios.logLagMs = 60_000;
  const uid = created.metadata!.uid!;
  const runner = f.double.docker.getContainer(
    (await podContainers(f.double, uid)).find((c) => c.Labels['org.sandgate.k8s-double.container'] === 'runner')!.Id,
  );
  const exec = await runner.exec({ Cmd: ['touch', '/sig/go'] });
  await exec.start({});
  for (let i = 0; !(await runner.logs({ stdout: true, follow: false })).toString().includes('after'); i++) {
    assert.ok(i < 100, 'the runtime should have the line');
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(await read(), '', 'written, but not yet readable through pods/log');
  f.double.scenarios.logLagMs = 0;
  assert.equal(await read(), 'after\n');

  f.double.deleteExternally('Pod', f.namespace, 'logs-2');
  assert.equal((await failure(f.core.readNamespacedPod({ name: 'logs-2', namespace: f.namespace }))).code, 404);
  assert.equal((await failure(read())).code, 404);
  await f.double.settled();
  assert.equal((await podContainers(f.double, uid)).length, 0);
  assert.ok(!f.double.calls.some((c) => c.verb === 'delete'), 'an external delete is not a call of the client');
});

test('a forced waiting reason holds a container until released (CreateContainerConfigError on demand)', async (t) => {
  const f = await startDouble(t, { node: { retryMs: 200 } });
  const hold = f.double.scenarios.containerWaiting(
    'forced-1',
    'runner',
    'CreateContainerConfigError',
    'secret "x" not found',
  );
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('forced-1', { containers: [shContainer('runner', 'echo ok')] }),
  });
  const w = await waitForPod(
    f,
    'forced-1',
    (p) => p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CreateContainerConfigError',
  );
  assert.equal(w.pod.status?.containerStatuses?.[0]?.state?.waiting?.message, 'secret "x" not found');
  hold.release();
  assert.equal((await waitForPod(f, 'forced-1', terminal)).pod.status?.phase, 'Succeeded');
});
