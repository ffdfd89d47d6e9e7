import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:https';
import * as k8s from '@kubernetes/client-node';
import { TestNamespace } from './cluster.ts';
import { renderChart } from './helm.ts';

const RESTRICTED: k8s.V1SecurityContext = {
  runAsNonRoot: true,
  runAsUser: 1000,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

/**
 * The chart's Role, as the real API server's RBAC authorizer enforces it, against the calls of an exec-free run made
 * with the worker's ServiceAccount token: each granted verb is used and suffices, and nothing else is allowed.
 * test/kubernetes/rbac-contract.test.ts checks the Kubernetes backend's own calls the same way.
 */
test('the chart Role allows exactly the exec-free flow; exec, patch, events, reading Secrets are 403', async (t) => {
  const ms = await renderChart({ values: { redis: { url: 'redis://r:6379' } }, name: 'sg', namespace: 'sandgate' });
  const rules = ms.find((m) => m.kind === 'Role')!.rules as { resources: string[]; verbs: string[] }[];
  const ns = await TestNamespace.create({ dir: '/tmp' });
  t.after(() => ns.close());
  const worker = new k8s.KubeConfig();
  worker.loadFromOptions(ns.kubeconfig);
  const core = worker.makeApiClient(k8s.CoreV1Api);
  const namespace = ns.name;
  const labels = { 'org.sandgate.managed': 'true', 'org.sandgate.execution': 'exec_1' };
  const created = await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name: 'sandgate-exec-1', labels },
      spec: {
        restartPolicy: 'Never',
        automountServiceAccountToken: false,
        terminationGracePeriodSeconds: 0,
        containers: [
          {
            name: 'runner',
            image: 'sandgate/runtime:1',
            command: ['sh', '-c', 'echo hello'],
            securityContext: RESTRICTED,
          },
        ],
      },
    },
  });
  const owner = { apiVersion: 'v1', kind: 'Pod', name: 'sandgate-exec-1', uid: created.metadata!.uid! };
  await core.createNamespacedSecret({
    namespace,
    body: { metadata: { name: 'sandgate-exec-1-spec', ownerReferences: [owner] }, stringData: { a: '1' } },
  });
  for (let i = 0; ; i++) {
    const phase = (await core.readNamespacedPod({ name: 'sandgate-exec-1', namespace })).status?.phase;
    if (phase === 'Succeeded' || phase === 'Failed') break;
    if (i > 600) throw new Error(`the Pod did not end (phase ${phase})`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const listed = await core.listNamespacedPod({ namespace, labelSelector: 'org.sandgate.execution=exec_1' });
  assert.equal(listed.items.length, 1);
  // The worker's watch of its Pods, from the list's point in history (the server ends it after a second).
  const watched = await new Promise<string[]>((resolve, reject) => {
    const seen: string[] = [];
    void new k8s.Watch(worker)
      .watch(
        `/api/v1/namespaces/${namespace}/pods`,
        {
          labelSelector: 'org.sandgate.execution=exec_1',
          resourceVersion: listed.metadata!.resourceVersion!,
          timeoutSeconds: 1,
        },
        (type: string) => seen.push(type),
        (err: unknown) => (err ? reject(err as Error) : resolve(seen)),
      )
      .catch(reject);
  });
  assert.deepEqual(watched, [], 'nothing changed since the list');
  assert.equal(
    await core.readNamespacedPodLog({ name: 'sandgate-exec-1', namespace, container: 'runner', limitBytes: 1024 }),
    'hello\n',
  );
  await core.deleteNamespacedPod({ name: 'sandgate-exec-1', namespace, gracePeriodSeconds: 0 });
  // No verb on Secrets but create: the garbage collector removes the Secret with its owner.
  for (let i = 0; ; i++) {
    const left = await ns.core.readNamespacedSecret({ name: 'sandgate-exec-1-spec', namespace }).then(
      () => true,
      () => false,
    );
    if (!left) break;
    if (i > 300) throw new Error('the garbage collector left the Secret');
    await new Promise((r) => setTimeout(r, 100));
  }
  const calls = await ns.calls();
  assert.deepEqual(
    calls.filter((c) => c.status === 403),
    [],
  );
  const granted = rules.flatMap((r) => r.resources.flatMap((res) => r.verbs.map((v) => `${v} ${res}`))).sort();
  assert.deepEqual(
    [...new Set(calls.map((c) => `${c.verb} ${c.resource}`))].sort(),
    granted,
    'every granted verb, only those',
  );

  const cluster = worker.getCurrentCluster()!;
  const token = ns.kubeconfig.users[0]!.token;
  const status = (method: string, path: string, inNamespace = namespace) =>
    new Promise<number>((resolve, reject) => {
      const url = new URL(`/api/v1/namespaces/${inNamespace}/${path}`, cluster.server);
      const req = request(
        url,
        { method, headers: { authorization: `Bearer ${token}` }, ca: Buffer.from(cluster.caData!, 'base64') },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
        },
      );
      req.on('error', reject);
      req.end();
    });
  assert.equal(await status('POST', 'pods/x/exec?command=id&stdout=true'), 403);
  assert.equal(await status('GET', 'pods/x/exec?command=id&stdout=true'), 403, 'nor by a websocket-style GET');
  assert.equal(await status('POST', 'pods/x/attach'), 403);
  assert.equal(await status('POST', 'pods/x/portforward'), 403);
  assert.equal(await status('GET', 'secrets?watch=true'), 403, 'no watch of Secrets');
  assert.equal(await status('PATCH', 'pods/x'), 403);
  assert.equal(await status('GET', 'events'), 403);
  assert.equal(await status('GET', 'secrets'), 403, 'no list: it would return every Secret of the namespace');
  assert.equal(await status('GET', 'secrets/sandgate-exec-1-spec'), 403);
  assert.equal(await status('DELETE', 'secrets/sandgate-exec-1-spec'), 403);
  assert.equal(await status('PUT', 'secrets/sandgate-exec-1-spec'), 403, 'no update');
  assert.equal(await status('DELETE', 'pods'), 403, 'no deletecollection');
  assert.equal(await status('GET', 'pods', 'default'), 403, 'no other namespace');
});
