import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { failure, pod, RESTRICTED, shContainer, startDouble, terminal, waitForEvent, waitForPod } from './testing.ts';

/** /proc/self/status fields that show what the runtime applied. */
const PROC = "grep -E '^(Uid|Gid|Groups|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status";

test('securityContext is applied: uid/gid, fsGroup, capabilities, no_new_privs, seccomp, read-only root', async (t) => {
  const f = await startDouble(t);
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('sec-1', {
      securityContext: { fsGroup: 2000 },
      volumes: [{ name: 'work', emptyDir: {} }],
      containers: [
        shContainer('runner', `${PROC}; touch /rootfs-write 2>&1; touch /work/ok && stat -c '%g %a' /work/ok`, {
          securityContext: { ...RESTRICTED, runAsUser: 1234, runAsGroup: 4321 },
          volumeMounts: [{ name: 'work', mountPath: '/work' }],
          resources: { limits: { cpu: '500m', memory: '96Mi' } },
        }),
      ],
    }),
  });
  const { pod: done } = await waitForPod(f, 'sec-1', terminal);
  const id = done.status!.containerStatuses![0]!.containerID!.replace('docker://', '');
  const host = (await f.double.docker.getContainer(id).inspect()).HostConfig;
  assert.equal(host.NanoCpus, 500_000_000, 'cpu: 500m');
  assert.equal(host.Memory, 96 * 1024 * 1024);
  assert.equal(host.MemorySwap, 96 * 1024 * 1024, 'no swap beyond the limit');
  const log = await f.core.readNamespacedPodLog({ name: 'sec-1', namespace: f.namespace });
  assert.match(log, /^Uid:\s+1234\s+1234/m);
  assert.match(log, /^Gid:\s+4321\s+4321/m);
  assert.match(log, /^Groups:.*\b2000\b/m);
  assert.match(log, /^CapEff:\s+0000000000000000$/m);
  assert.match(log, /^NoNewPrivs:\s+1$/m);
  assert.match(log, /^Seccomp:\s+2$/m);
  assert.match(log, /Read-only file system/);
  assert.match(log, /^2000 644$/m, 'files made in an fsGroup emptyDir belong to the group (setgid directory)');
});

test('a Secret volume is mounted only where asked, laid out as the kubelet does, items and defaultMode', async (t) => {
  const f = await startDouble(t);
  await f.core.createNamespacedSecret({
    namespace: f.namespace,
    body: { metadata: { name: 'spec-1' }, stringData: { 'spec.json': '{"a":1}', other: 'x' } },
  });
  const mount = [{ name: 'spec', mountPath: '/spec', readOnly: true }];
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('secret-vol', {
      // 0440 files belong to root: without an fsGroup to own them, uid 65534 could not read them (as on a node).
      securityContext: { fsGroup: 65534 },
      volumes: [
        {
          name: 'spec',
          secret: { secretName: 'spec-1', defaultMode: 0o440, items: [{ key: 'spec.json', path: 'conf/spec.json' }] },
        },
      ],
      initContainers: [
        shContainer(
          'stage',
          [
            'cat /spec/conf/spec.json; echo',
            "ls -A /spec | tr '\\n' ' '; echo",
            'readlink /spec/conf /spec/..data',
            "stat -L -c '%a' /spec/conf/spec.json",
            "touch /spec/x 2>&1 | grep -o 'Read-only file system'",
          ].join('; '),
          { volumeMounts: mount },
        ),
      ],
      containers: [shContainer('runner', 'ls /spec 2>&1; echo "mounts=$(grep -c /spec /proc/mounts)"')],
    }),
  });
  const { pod: p } = await waitForPod(f, 'secret-vol', terminal);
  assert.equal(p.status?.phase, 'Succeeded');
  const stage = (
    await f.core.readNamespacedPodLog({ name: 'secret-vol', namespace: f.namespace, container: 'stage' })
  ).split('\n');
  assert.equal(stage[0], '{"a":1}');
  assert.match(
    stage[1]!,
    /^\.\.\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d\.\d+ \.\.data conf $/,
    'only the items asked for, behind ..data',
  );
  assert.equal(stage[2], '..data/conf');
  assert.match(stage[3]!, /^\.\.\d{4}_/);
  assert.equal(stage[4], '440');
  assert.equal(stage[5], 'Read-only file system');
  const runner = await f.core.readNamespacedPodLog({ name: 'secret-vol', namespace: f.namespace, container: 'runner' });
  assert.match(runner, /No such file or directory\nmounts=0\n$/);
});

test('a missing Secret volume keeps the Pod Pending with FailedMount events until the Secret appears', async (t) => {
  const f = await startDouble(t, { node: { retryMs: 200 } });
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('mount-1', {
      volumes: [{ name: 'spec', secret: { secretName: 'later' } }],
      containers: [shContainer('runner', 'cat /spec/k', { volumeMounts: [{ name: 'spec', mountPath: '/spec' }] })],
    }),
  });
  const pending = await waitForPod(
    f,
    'mount-1',
    (p) => p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ContainerCreating',
  );
  assert.equal(pending.pod.status?.phase, 'Pending');
  const event = await waitForEvent(f, 'involvedObject.name=mount-1,reason=FailedMount');
  assert.equal(event.message, 'MountVolume.SetUp failed for volume "spec" : secret "later" not found');
  assert.equal(event.type, 'Warning');
  await f.core.createNamespacedSecret({
    namespace: f.namespace,
    body: { metadata: { name: 'later' }, stringData: { k: 'arrived' } },
  });
  const { pod: p } = await waitForPod(f, 'mount-1', terminal);
  assert.equal(p.status?.phase, 'Succeeded');
  assert.equal(await f.core.readNamespacedPodLog({ name: 'mount-1', namespace: f.namespace }), 'arrived');
});

test('the service-account token is mounted unless automountServiceAccountToken is false', async (t) => {
  const f = await startDouble(t);
  const script = 'cat /var/run/secrets/kubernetes.io/serviceaccount/namespace 2>/dev/null || echo no-token';
  const withToken = pod('token-yes', { containers: [shContainer('runner', script)] });
  delete withToken.spec!.automountServiceAccountToken;
  const created = await f.core.createNamespacedPod({ namespace: f.namespace, body: withToken });
  assert.ok(
    created.spec?.volumes?.some((v) => v.name.startsWith('kube-api-access-')),
    'the admission adds the token volume',
  );
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('token-no', { containers: [shContainer('runner', script)] }),
  });
  await waitForPod(f, 'token-yes', terminal);
  await waitForPod(f, 'token-no', terminal);
  assert.equal(await f.core.readNamespacedPodLog({ name: 'token-yes', namespace: f.namespace }), f.namespace);
  assert.equal(await f.core.readNamespacedPodLog({ name: 'token-no', namespace: f.namespace }), 'no-token\n');
});

test('runtimeClassName: gvisor runs on runsc; unknown class is 403; missing handler fails the sandbox', async (t) => {
  const f = await startDouble(t, { node: { runtimeClasses: { gvisor: 'runsc', kata: 'kata-runtime' } } });
  const runtimes = Object.keys(((await f.double.docker.info()) as { Runtimes?: object }).Runtimes ?? {});
  const unknown = await failure(
    f.core.createNamespacedPod({
      namespace: f.namespace,
      body: pod('rc-unknown', {
        runtimeClassName: 'nope',
        containers: [shContainer('runner', 'true')],
      }),
    }),
  );
  assert.equal(unknown.code, 403);
  assert.equal(unknown.message, 'pods "rc-unknown" is forbidden: pod rejected: RuntimeClass "nope" not found');
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('rc-kata', { runtimeClassName: 'kata', containers: [shContainer('runner', 'true')] }),
  });
  await waitForPod(
    f,
    'rc-kata',
    (p) => p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ContainerCreating',
  );
  assert.match(
    (await waitForEvent(f, 'involvedObject.name=rc-kata,reason=FailedCreatePodSandBox')).message ?? '',
    /no runtime for "kata-runtime" is configured/,
  );
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('rc-gvisor', { runtimeClassName: 'gvisor', containers: [shContainer('runner', 'uname -r')] }),
  });
  if (!runtimes.includes('runsc')) {
    // An engine without gVisor is a node without the handler: the same sandbox failure, not a silent runc run.
    assert.match(
      (await waitForEvent(f, 'involvedObject.name=rc-gvisor,reason=FailedCreatePodSandBox')).message ?? '',
      /no runtime for "runsc"/,
    );
    return;
  }
  const { pod: p } = await waitForPod(f, 'rc-gvisor', terminal);
  assert.equal(p.status?.phase, 'Succeeded');
  assert.equal(
    await f.core.readNamespacedPodLog({ name: 'rc-gvisor', namespace: f.namespace }),
    '4.4.0\n',
    'gVisor reports its own kernel',
  );
});

test('a Pod IP is reachable from the host; the Pod reaches only allowed host ports, nothing beyond', async (t) => {
  const listen = async () => {
    const srv = createServer((_q, s) => s.end('host-ok'));
    await new Promise<void>((r) => srv.listen(0, '0.0.0.0', r));
    t.after(() => new Promise((r) => srv.close(r)));
    return (srv.address() as { port: number }).port;
  };
  const [hostPort, closedPort] = [await listen(), await listen()];
  const f = await startDouble(t, { hostPorts: [hostPort] });
  // A container on an ordinary bridge network of its own stands for "anywhere else".
  const labels = { 'org.sandgate.k8s-double': f.double.id };
  const elsewhere = await f.double.docker.createNetwork({
    Name: `k8sd-${f.double.id}-elsewhere`,
    Driver: 'bridge',
    Labels: labels,
  });
  t.after(() => elsewhere.remove().catch(() => {}));
  const other = await f.double.docker.createContainer({
    Image: 'sandgate/runtime:1',
    Cmd: ['python3', '-m', 'http.server', '8000'],
    Labels: labels,
    HostConfig: { NetworkMode: `k8sd-${f.double.id}-elsewhere` },
  });
  t.after(() => other.remove({ force: true }).catch(() => {}));
  await other.start();
  const otherIP = (await other.inspect()).NetworkSettings.Networks[`k8sd-${f.double.id}-elsewhere`]!.IPAddress;
  const probe = `import socket, sys
def reach(h, p):
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((h, p)); return 'open'
    except OSError as e:
        return type(e).__name__
print('host', reach('${f.double.hostIP}', ${hostPort}))
print('fenced', reach('${f.double.hostIP}', ${closedPort}))
print('other', reach('${otherIP}', 8000))
sys.stdout.flush()
import http.server, socketserver
http.server.ThreadingHTTPServer(('0.0.0.0', 8080), http.server.SimpleHTTPRequestHandler).serve_forever()`;
  await f.core.createNamespacedPod({
    namespace: f.namespace,
    body: pod('net-1', {
      containers: [{ ...shContainer('agent', ''), command: ['python3', '-c', probe], workingDir: '/tmp' }],
    }),
  });
  const { pod: p } = await waitForPod(f, 'net-1', (x) => x.status?.phase === 'Running' && !!x.status.podIP);
  let body = '';
  for (let i = 0; i < 100 && !body; i++) {
    body = await fetch(`http://${p.status!.podIP}:8080/`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.text(),
      () => '',
    );
    if (!body) await new Promise((r) => setTimeout(r, 100));
  }
  assert.match(body, /Directory listing/);
  let log = '';
  for (let i = 0; i < 100 && !/other/.test(log); i++) {
    log = await f.core.readNamespacedPodLog({ name: 'net-1', namespace: f.namespace });
    if (!/other/.test(log)) await new Promise((r) => setTimeout(r, 100));
  }
  assert.match(log, /^host open$/m);
  assert.match(log, /^fenced (timeout|TimeoutError)$/m, 'a host port not allowed is dropped');
  assert.match(log, /^other (timeout|TimeoutError|ConnectionRefusedError|OSError)$/m);
  assert.doesNotMatch(log, /^other open$/m);
});
