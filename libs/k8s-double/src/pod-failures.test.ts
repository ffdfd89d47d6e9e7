import { test } from 'node:test';
import assert from 'node:assert/strict';
import { failure, pod, shContainer, startDouble, terminal, waitForPod } from './testing.ts';

test('a container over its memory limit ends terminated{137, OOMKilled} and the Pod Failed', async (t) => {
  const f = await startDouble(t);
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('oom-1', {
      containers: [
        {
          ...shContainer('runner', ''),
          command: ['python3', '-c', 'b = bytearray(512 * 1024 * 1024); print(len(b))'],
          resources: { limits: { memory: '64Mi', cpu: '500m' } },
        },
      ],
    }),
  });
  const { pod: p } = await waitForPod(f, 'oom-1', terminal);
  assert.equal(p.status?.phase, 'Failed');
  const term = p.status?.containerStatuses?.[0]?.state?.terminated;
  assert.equal(term?.reason, 'OOMKilled');
  assert.equal(term?.exitCode, 137);
  assert.equal(p.status?.qosClass, 'Guaranteed');
});

test('activeDeadlineSeconds: Failed with reason DeadlineExceeded and every container terminated', async (t) => {
  const f = await startDouble(t);
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('deadline-1', {
      // Room for both containers to start on a loaded machine: the deadline counts from the Pod's start, as the
      // kubelet's does, so a Pod slower than it would be killed before it ever ran.
      activeDeadlineSeconds: 6,
      containers: [shContainer('runner', 'echo started; sleep 300'), shContainer('harvest', 'sleep 300')],
    }),
  });
  const { pod: p, phases } = await waitForPod(f, 'deadline-1', terminal);
  assert.ok(phases.includes('Running'), phases.join(','));
  assert.equal(p.status?.phase, 'Failed');
  assert.equal(p.status?.reason, 'DeadlineExceeded');
  assert.equal(p.status?.message, 'Pod was active on the node longer than the specified deadline');
  for (const c of p.status?.containerStatuses ?? []) assert.equal(c.state?.terminated?.exitCode, 137, c.name);
  const started = Date.parse(p.status!.startTime as unknown as string);
  const ended = Math.max(
    ...(p.status?.containerStatuses ?? []).map((c) => Date.parse(String(c.state?.terminated?.finishedAt))),
  );
  assert.ok(ended - started >= 5000, `killed after ${ended - started} ms`);
  // Logs stay readable after the kill, as long as the Pod exists.
  assert.equal(
    await f.core.readNamespacedPodLog({ name: 'deadline-1', namespace: f.namespace, container: 'runner' }),
    'started\n',
  );
});

test('an emptyDir over its sizeLimit evicts the Pod: Failed/Evicted, kubelet message, statuses unknown', async (t) => {
  const f = await startDouble(t);
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('evict-1', {
      volumes: [{ name: 'workspace', emptyDir: { sizeLimit: '4Mi' } }],
      containers: [
        shContainer('runner', 'echo writing; head -c 16777216 /dev/zero > /work/big; sleep 300', {
          volumeMounts: [{ name: 'workspace', mountPath: '/work' }],
        }),
      ],
    }),
  });
  const { pod: p } = await waitForPod(f, 'evict-1', terminal);
  assert.equal(p.status?.phase, 'Failed');
  assert.equal(p.status?.reason, 'Evicted');
  assert.equal(p.status?.message, 'Usage of EmptyDir volume "workspace" exceeds the limit "4Mi". ');
  const term = p.status?.containerStatuses?.[0]?.state?.terminated;
  assert.equal(term?.reason, 'ContainerStatusUnknown');
  assert.equal(term?.exitCode, 137);
  assert.equal(term?.finishedAt, undefined);
  const log = await f.core.readNamespacedPodLog({ name: 'evict-1', namespace: f.namespace, container: 'runner' });
  assert.match(log, /^unable to retrieve container logs for docker:\/\/[0-9a-f]{64}$/);
});

test('a memory-backed emptyDir lives as long as its Pod: what the init container wrote, the app container reads', async (t) => {
  const f = await startDouble(t);
  const scratch = { volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }] };
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('tmpfs-2', {
      volumes: [{ name: 'scratch', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }],
      initContainers: [shContainer('stage', 'echo kept > /scratch/note', scratch)],
      containers: [shContainer('runner', 'cat /scratch/note; df -k /scratch | tail -1', scratch)],
    }),
  });
  const { pod: p } = await waitForPod(f, 'tmpfs-2', terminal);
  assert.equal(p.status?.phase, 'Succeeded');
  const log = await f.core.readNamespacedPodLog({ name: 'tmpfs-2', namespace: f.namespace, container: 'runner' });
  assert.match(log, /^kept\n/);
  assert.match(log, /^tmpfs\s+1024\s/m);
});

test('a memory-backed emptyDir is a tmpfs of sizeLimit: the writer gets ENOSPC, no eviction', async (t) => {
  const f = await startDouble(t);
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('tmpfs-1', {
      volumes: [{ name: 'scratch', emptyDir: { medium: 'Memory', sizeLimit: '8Mi' } }],
      containers: [
        shContainer('runner', 'df -k /scratch | tail -1; head -c 16777216 /dev/zero > /scratch/big; echo "exit=$?"', {
          volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }],
          resources: { limits: { memory: '128Mi' } },
        }),
      ],
    }),
  });
  const { pod: p } = await waitForPod(f, 'tmpfs-1', terminal);
  assert.equal(p.status?.phase, 'Succeeded');
  assert.equal(p.status?.reason, undefined);
  const log = await f.core.readNamespacedPodLog({ name: 'tmpfs-1', namespace: f.namespace });
  assert.match(log, /^tmpfs\s+8192\s/m);
  assert.match(log, /No space left on device/);
  assert.match(log, /exit=1/);
});

test('a failing init container fails the Pod; app containers wait PodInitializing, their log is 400', async (t) => {
  const f = await startDouble(t);
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('init-fail', {
      initContainers: [shContainer('stage', 'echo cannot fetch inputs; exit 3')],
      containers: [shContainer('runner', 'echo never'), shContainer('harvest', 'echo never')],
    }),
  });
  const { pod: p } = await waitForPod(f, 'init-fail', terminal);
  assert.equal(p.status?.phase, 'Failed');
  assert.equal(p.status?.initContainerStatuses?.[0]?.state?.terminated?.exitCode, 3);
  assert.equal(p.status?.initContainerStatuses?.[0]?.state?.terminated?.reason, 'Error');
  for (const c of p.status?.containerStatuses ?? []) assert.equal(c.state?.waiting?.reason, 'PodInitializing', c.name);
  const s = await failure(
    f.core.readNamespacedPodLog({ name: 'init-fail', namespace: f.namespace, container: 'runner' }),
  );
  assert.equal(s.code, 400);
  assert.equal(s.message, 'container "runner" in pod "init-fail" is waiting to start: PodInitializing');
  assert.equal(
    await f.core.readNamespacedPodLog({ name: 'init-fail', namespace: f.namespace, container: 'stage' }),
    'cannot fetch inputs\n',
  );
  const ambiguous = await failure(f.core.readNamespacedPodLog({ name: 'init-fail', namespace: f.namespace }));
  assert.equal(
    ambiguous.message,
    'a container name must be specified for pod init-fail, choose one of: [runner harvest] ' +
      'or one of the init containers: [stage]',
  );
});

test('an image the engine lacks: ErrImagePull, ImagePullBackOff, Pending while the other one runs', async (t) => {
  const f = await startDouble(t, { node: { retryMs: 300 } });
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('pull-1', {
      containers: [
        shContainer('harvest', 'sleep 300'),
        { ...shContainer('runner', 'true'), image: 'sandgate/no-such-image:404' },
      ],
    }),
  });
  const seen = new Set<string>();
  const { pod: p } = await waitForPod(f, 'pull-1', (x) => {
    const w = x.status?.containerStatuses?.find((c) => c.name === 'runner')?.state?.waiting?.reason;
    if (w) seen.add(w);
    return (
      seen.has('ImagePullBackOff') &&
      x.status?.containerStatuses?.find((c) => c.name === 'harvest')?.state?.running !== undefined
    );
  });
  assert.ok(seen.has('ErrImagePull'), [...seen].join(','));
  assert.equal(p.status?.phase, 'Pending');
  const s = await failure(f.core.readNamespacedPodLog({ name: 'pull-1', namespace: f.namespace, container: 'runner' }));
  assert.equal(s.message, 'container "runner" in pod "pull-1" is waiting to start: trying and failing to pull image');
  const events = await f.core.listNamespacedEvent({
    namespace: f.namespace,
    fieldSelector: 'involvedObject.name=pull-1,reason=Failed',
  });
  assert.match(events.items[0]?.message ?? '', /Failed to pull image "sandgate\/no-such-image:404"/);
});

test('InvalidImageName and CreateContainerConfigError hold; a Secret that appears lets it start', async (t) => {
  const f = await startDouble(t, { node: { retryMs: 200 } });
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('bad-image', {
      containers: [{ ...shContainer('runner', 'true'), image: 'Not/A Valid:Image' }],
    }),
  });
  const bad = await waitForPod(
    f,
    'bad-image',
    (x) => x.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'InvalidImageName',
  );
  assert.equal(bad.pod.status?.phase, 'Pending');

  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('env-secret', {
      containers: [
        shContainer('runner', 'echo "token=$TOKEN"', {
          env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'late', key: 'token' } } }],
        }),
      ],
    }),
  });
  const waiting = await waitForPod(
    f,
    'env-secret',
    (x) => x.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CreateContainerConfigError',
  );
  assert.equal(waiting.pod.status?.containerStatuses?.[0]?.state?.waiting?.message, 'secret "late" not found');
  await f.core.createNamespacedSecret({
    namespace: f.namespace,
    body: { metadata: { name: 'late' }, stringData: { token: 's3cret' } },
  });
  await waitForPod(f, 'env-secret', terminal);
  assert.equal(await f.core.readNamespacedPodLog({ name: 'env-secret', namespace: f.namespace }), 'token=s3cret\n');
});
