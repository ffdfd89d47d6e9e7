import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PolicyRule } from '@sandgate/k8s-double';
import { pod, shContainer, startDouble, terminal, waitForPod } from '@sandgate/k8s-double/testing';
import { renderChart } from './kubernetes/helm.ts';

/**
 * The chart's Role, enforced by the API double, against the calls of an exec-free run: each granted verb is used
 * and suffices, and nothing else is allowed. The Kubernetes backend's own suite runs its real calls the same way.
 */
test('the chart Role allows exactly the exec-free flow; exec, watch, patch, events, reading Secrets are 403', async (t) => {
  const ms = await renderChart({ values: { redis: { url: 'redis://r:6379' } }, name: 'sg', namespace: 'sandgate' });
  const role = ms.find((m) => m.kind === 'Role')!;
  const f = await startDouble(t, {
    namespaces: [role.metadata.namespace!],
    rbac: { user: 'system:serviceaccount:sandgate:sg-sandgate-worker', rules: role.rules as PolicyRule[] },
  });
  const namespace = f.namespace;
  const labels = {
    'org.sandgate.managed': 'true',
    'org.sandgate.deployment': 'sandgate',
    'org.sandgate.execution': 'exec_1',
  };
  const created = await f.core.createNamespacedPod({
    namespace,
    body: pod('sandgate-exec-1', { containers: [shContainer('runner', 'echo hello')] }, labels),
  });
  const owner = { apiVersion: 'v1', kind: 'Pod', name: 'sandgate-exec-1', uid: created.metadata!.uid! };
  await f.core.createNamespacedSecret({
    namespace,
    body: { metadata: { name: 'sandgate-exec-1-spec', ownerReferences: [owner] }, stringData: { a: '1' } },
  });
  // A retry of the execution replaces its leftover Secret without reading it: update, never get.
  await f.core.replaceNamespacedSecret({
    name: 'sandgate-exec-1-spec',
    namespace,
    body: { metadata: { name: 'sandgate-exec-1-spec', ownerReferences: [owner] }, stringData: { a: '2' } },
  });
  await waitForPod(f, 'sandgate-exec-1', terminal);
  assert.equal(
    (await f.core.listNamespacedPod({ namespace, labelSelector: 'org.sandgate.execution=exec_1' })).items.length,
    1,
  );
  assert.equal(
    await f.core.readNamespacedPodLog({ name: 'sandgate-exec-1', namespace, container: 'runner', limitBytes: 1024 }),
    'hello\n',
  );
  await f.core.deleteNamespacedPod({ name: 'sandgate-exec-1', namespace, gracePeriodSeconds: 0 });
  // No verb on Secrets but create and update: the garbage collector removes the Secret with its owner.
  await until(() => f.double.store.get('Secret', namespace, 'sandgate-exec-1-spec') === undefined);
  assert.ok(
    f.double.calls.every((c) => c.status !== 403),
    JSON.stringify(f.double.calls.filter((c) => c.status === 403)),
  );
  const granted = (role.rules as PolicyRule[])
    .flatMap((r) => (r.resources ?? []).flatMap((res) => r.verbs.map((v) => `${v} ${res}`)))
    .sort();
  assert.deepEqual(f.double.verbs(), granted, 'the flow used every granted verb, and only those');

  const denied = async (method: string, path: string) => {
    const res = await fetch(`${f.double.url}/api/v1/namespaces/${namespace}/${path}`, {
      method,
      headers: { authorization: `Bearer ${f.double.token}` },
    });
    return res.status;
  };
  assert.equal(await denied('POST', 'pods/x/exec?command=id'), 403);
  assert.equal(await denied('POST', 'pods/x/attach'), 403);
  assert.equal(await denied('GET', 'pods/x/portforward'), 403);
  assert.equal(await denied('GET', 'pods?watch=true'), 403);
  assert.equal(await denied('PATCH', 'pods/x'), 403);
  assert.equal(await denied('GET', 'events'), 403);
  assert.equal(await denied('GET', 'secrets'), 403, 'no list: it would return every Secret of the namespace');
  assert.equal(await denied('GET', 'secrets/sandgate-exec-1-spec'), 403);
  assert.equal(await denied('DELETE', 'secrets/sandgate-exec-1-spec'), 403);
  assert.equal(await denied('DELETE', 'pods'), 403, 'no deletecollection');
});

async function until(done: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}
