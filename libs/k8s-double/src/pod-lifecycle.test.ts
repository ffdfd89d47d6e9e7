import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DOUBLE_LABELS } from './docker-labels.ts';
import { pod, podContainers, shContainer, startDouble, terminal, waitForPod } from './testing.ts';

test('a Pod runs for real: init fills an emptyDir, two containers read it, Running → Succeeded', async (t) => {
  // No warm sandboxes: the pause container is made for this Pod and carries its labels too.
  const f = await startDouble(t, { node: { warmSandboxes: 0 } });
  const created = await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod(
      'run-1',
      {
        volumes: [{ name: 'work', emptyDir: { sizeLimit: '16Mi' } }],
        initContainers: [
          shContainer('stage', 'echo staged-by-init > /work/input.txt', {
            volumeMounts: [{ name: 'work', mountPath: '/work' }],
          }),
        ],
        containers: [
          shContainer('runner', 'cat /work/input.txt; sleep 1; echo runner-done', {
            volumeMounts: [{ name: 'work', mountPath: '/work' }],
          }),
          shContainer('harvest', 'sleep 1.5; id -u; echo harvested', {
            volumeMounts: [{ name: 'work', mountPath: '/work', readOnly: true }],
          }),
        ],
      },
      { app: 'lifecycle' },
    ),
  });
  assert.equal(created.status?.phase, 'Pending');
  assert.match(created.metadata?.uid ?? '', /^[0-9a-f-]{36}$/);
  assert.ok(Number(created.metadata?.resourceVersion) > 0);

  const running = await waitForPod(f, 'run-1', (p) => p.status?.phase === 'Running');
  const st = running.pod.status!;
  assert.equal(st.initContainerStatuses?.[0]?.state?.terminated?.exitCode, 0);
  assert.equal(st.initContainerStatuses?.[0]?.state?.terminated?.reason, 'Completed');
  assert.ok(st.initContainerStatuses?.[0]?.state?.terminated?.finishedAt);
  assert.ok(
    st.containerStatuses?.every((c) => c.state?.running?.startedAt),
    JSON.stringify(st.containerStatuses),
  );
  assert.match(st.podIP ?? '', /^\d+\.\d+\.\d+\.\d+$/);
  assert.ok(st.startTime);
  assert.equal(running.pod.spec?.nodeName, 'k8s-double-node');
  assert.equal(st.conditions?.find((c) => c.type === 'PodScheduled')?.status, 'True');
  assert.equal(st.conditions?.find((c) => c.type === 'Initialized')?.status, 'True');

  const done = await waitForPod(f, 'run-1', terminal);
  assert.equal(done.pod.status?.phase, 'Succeeded');
  for (const c of done.pod.status?.containerStatuses ?? []) {
    assert.equal(c.state?.terminated?.exitCode, 0, c.name);
    assert.equal(c.state?.terminated?.reason, 'Completed', c.name);
  }
  assert.equal(done.pod.status?.conditions?.find((c) => c.type === 'Ready')?.reason, 'PodCompleted');

  const runnerLog = await f.core.readNamespacedPodLog({ name: 'run-1', namespace: f.namespace, container: 'runner' });
  assert.equal(runnerLog, 'staged-by-init\nrunner-done\n');
  const harvestLog = await f.core.readNamespacedPodLog({ name: 'run-1', namespace: f.namespace, container: 'harvest' });
  assert.equal(harvestLog, '65534\nharvested\n');
  const stageLog = await f.core.readNamespacedPodLog({ name: 'run-1', namespace: f.namespace, container: 'stage' });
  assert.equal(stageLog, '');

  // Every Docker object carries the double's labels: pause + three containers for this Pod.
  const mine = await podContainers(f.double, created.metadata!.uid!);
  assert.deepEqual(mine.map((c) => c.Labels[DOUBLE_LABELS.container]).sort(), ['POD', 'harvest', 'runner', 'stage']);
  assert.ok(mine.every((c) => c.Labels[DOUBLE_LABELS.double] === f.double.id));
});

test('pods/log: limitBytes cuts mid-line and mid-character, tailLines, sinceTime and timestamps', async (t) => {
  const f = await startDouble(t);
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('logs-1', {
      containers: [
        shContainer(
          'runner',
          "printf 'first line\\n'; printf 'h\\303\\251llo w\\303\\266rld\\n'; printf 'third\\n'; printf 'no newline'",
        ),
      ],
    }),
  });
  await waitForPod(f, 'logs-1', terminal);
  const read = async (q: Record<string, unknown>) => {
    const query = new URLSearchParams(q as Record<string, string>);
    const res = await fetch(`${f.double.url}/api/v1/namespaces/${f.namespace}/pods/logs-1/log?${query}`, {
      headers: { authorization: `Bearer ${f.double.token}` },
    });
    assert.equal(res.status, 200);
    return Buffer.from(await res.arrayBuffer());
  };
  const full = await read({});
  assert.equal(full.toString('utf8'), 'first line\nh\u00e9llo w\u00f6rld\nthird\nno newline');
  const cut = await read({ limitBytes: '13' });
  assert.deepEqual(cut, full.subarray(0, 13));
  assert.equal(cut[12], 0xc3, 'the cut lands between the two bytes of é');
  assert.equal((await read({ tailLines: '2' })).toString(), 'third\nno newline');
  assert.equal((await read({ tailLines: '2', limitBytes: '4' })).toString(), 'thir');
  const stamped = (await read({ timestamps: 'true' })).toString().split('\n');
  assert.match(stamped[0]!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z first line$/);
  assert.equal((await read({ sinceTime: '2999-01-01T00:00:00Z' })).length, 0);
  assert.equal((await read({ sinceSeconds: '3600' })).toString('utf8'), full.toString('utf8'));
  const viaClient = await f.core.readNamespacedPodLog({
    name: 'logs-1',
    namespace: f.namespace,
    limitBytes: 5,
    tailLines: 1,
  });
  assert.equal(viaClient, 'no ne');
});

test('delete with grace 0: 200 with the object, then 404; its Docker containers and volumes are gone', async (t) => {
  const f = await startDouble(t, { node: { warmSandboxes: 0 } });
  const created = await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('del-1', {
      volumes: [{ name: 'work', emptyDir: {} }],
      containers: [shContainer('runner', 'sleep 300', { volumeMounts: [{ name: 'work', mountPath: '/work' }] })],
    }),
  });
  await waitForPod(f, 'del-1', (p) => p.status?.phase === 'Running');
  const uid = created.metadata!.uid!;
  assert.equal((await podContainers(f.double, uid)).length, 2);
  const deleted = await f.core.deleteNamespacedPod({ name: 'del-1', namespace: f.namespace, gracePeriodSeconds: 0 });
  assert.equal(deleted.metadata?.uid, uid);
  assert.ok(deleted.metadata?.deletionTimestamp);
  await assert.rejects(
    f.core.readNamespacedPod({ name: 'del-1', namespace: f.namespace }),
    (e: { code?: number }) => e.code === 404,
  );
  await f.double.settled();
  assert.equal((await podContainers(f.double, uid)).length, 0);
  const vols = await f.double.docker.listVolumes({ filters: { label: [`${DOUBLE_LABELS.pod}=${uid}`] } });
  assert.equal(vols.Volumes?.length ?? 0, 0);
  const again = await f.core
    .deleteNamespacedPod({ name: 'del-1', namespace: f.namespace, gracePeriodSeconds: 0 })
    .catch((e) => e);
  assert.equal(again.code, 404);
});

test('a Pod made under the name of one just deleted keeps its own status while the old one is torn down', async (t) => {
  const f = await startDouble(t, { node: { warmSandboxes: 0 } });
  const body = () => pod('same-name', { containers: [shContainer('main', 'sleep 300')] });
  const first = await f.core.createNamespacedPod({ namespace: f.namespace, body: body() });
  await waitForPod(f, 'same-name', (p) => p.status?.phase === 'Running');
  await f.core.deleteNamespacedPod({ name: 'same-name', namespace: f.namespace, gracePeriodSeconds: 0 });
  const second = await f.core.createNamespacedPod({ namespace: f.namespace, body: body() });
  assert.notEqual(second.metadata!.uid, first.metadata!.uid);
  // The first Pod's containers are killed meanwhile (exit 137): none of that may land on the second, ever.
  const phases: string[] = [];
  for (;;) {
    const p = await f.core.readNamespacedPod({ name: 'same-name', namespace: f.namespace });
    phases.push(p.status?.phase ?? 'none');
    if (p.status?.phase === 'Running' || phases.length > 500) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.ok(!phases.includes('Failed'), phases.join(' '));
  await f.double.settled();
  const now = await f.core.readNamespacedPod({ name: 'same-name', namespace: f.namespace });
  assert.equal(now.metadata?.uid, second.metadata!.uid);
  assert.equal(now.status?.phase, 'Running');
  assert.ok(now.status?.containerStatuses?.[0]?.state?.running, JSON.stringify(now.status?.containerStatuses));
});
