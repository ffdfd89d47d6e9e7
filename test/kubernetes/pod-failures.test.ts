import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { podName } from '@sandgate/backends/testing';
import { FAULTS } from '@sandgate/k8s-double';
import { startStack, until, type Stack } from '../harness.ts';
import { kubernetesBackendOf } from './backend-of.ts';
import { kubeCluster, WORKER_SERVICE_ACCOUNT } from './cluster.ts';

/** No warm Pods: every one-shot gets a Pod of its own (stage, runner, harvest), the path these tests are about. */
const ONE_POD_EACH = { SANDGATE_POOL_SIZE: '0' };

/**
 * How the Kubernetes backend ends runs when the cluster, not the code, goes wrong: each outcome is the one the Docker
 * backend gives for the same cause, or error/backend_unavailable with the Pod's own reason. The cluster is real
 * (a quota, an RBAC binding taken away, the kubelet's eviction, the scheduler finding no node); only what a real API
 * server cannot be made to do on demand (answer 429, 5xx, reset, hang) comes from the fault proxy in front of it.
 */

const run = async (s: Stack, body: Record<string, unknown>) => {
  const res = await s.api('POST', '/v1/executions?wait=90', { language: 'python', ...body });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body as { id: string; state: string; result: Record<string, any> };
};

test('kubernetes: API faults, eviction, a lost Pod and an unreachable gateway each end the run clearly', async (t) => {
  const s = await startStack({
    backend: 'kubernetes',
    cluster: { faults: true },
    env: { ...ONE_POD_EACH, SANDGATE_SESSION_DISK_BYTES: '16MiB' },
  });
  t.after(() => s.close());
  const ns = s.cluster!;
  const double = ns.proxy!;

  await t.test(
    'transient API failures (429 with Retry-After, 500, 503, a reset) are retried; the run completes',
    async () => {
      double.faults.inject({ match: { verb: 'create', resource: 'pods' }, action: FAULTS.tooManyRequests(1) });
      double.faults.inject({ match: { verb: 'delete', resource: 'pods' }, action: FAULTS.internalError(), times: 2 });
      double.faults.inject({
        match: { verb: 'get', resource: 'pods', subresource: 'log' },
        action: FAULTS.unavailable(),
      });
      double.faults.inject({ match: { verb: 'create', resource: 'secrets' }, action: FAULTS.reset() });
      const r = await run(s, { code: 'print("through")' });
      assert.equal(r.result.state, 'completed', JSON.stringify(r.result));
      assert.equal(r.result.stdout, 'through\n');
      assert.equal(await s.sandboxesOf(r.id), 0, 'its Pod deleted on the third attempt');
    },
  );

  await t.test(
    'a watch the API server refuses, then resets, is made again; runs meanwhile read their Pod',
    async () => {
      // Armed before the backend starts: its first watch requests meet them, and it retries with backoff.
      double.faults.inject({ match: { verb: 'watch', resource: 'pods' }, action: FAULTS.unavailable() });
      double.faults.inject({ match: { verb: 'watch', resource: 'pods' }, action: FAULTS.reset() });
      const watches = double.count('watch', 'pods');
      const backend = kubernetesBackendOf(s, t);
      const events = { out: [] as string[] };
      const result = await backend.execute(
        {
          execution_id: `exec_${randomBytes(8).toString('hex')}`,
          tenant: 'acme',
          session_id: `sess_${randomBytes(6).toString('hex')}`,
          language: 'python',
          code: 'print("watched")',
          timeout_ms: 10_000,
          memory_mb: 128,
          cpus: 0.5,
          env: {},
          stdin: null,
          sandbox: 'oneshot',
          generation: 0,
        },
        { phase: () => {}, stdout: (t) => events.out.push(t), stderr: () => {}, artifact: () => {} },
        new AbortController().signal,
      );
      assert.equal(result.state, 'completed', result.stderr);
      assert.equal(events.out.join(''), 'watched\n');
      await until('the watch to be in sync again', async () => backend.watch.synced);
      assert.ok(double.count('watch', 'pods') - watches >= 3, 'refused, reset, then made');
    },
  );

  await t.test(
    "a definitive refusal (403: the namespace's ResourceQuota) is not retried: error, backend_unavailable",
    async () => {
      const quota = { metadata: { name: 'no-pods' }, spec: { hard: { pods: '0' } } };
      await ns.core.createNamespacedResourceQuota({ namespace: ns.name, body: quota });
      // Admission counts against a quota only once its controller has set the quota's status.
      await until('the quota to be in force', async () => {
        const q = await ns.core.readNamespacedResourceQuota({ name: 'no-pods', namespace: ns.name });
        return q.status?.hard?.pods === '0';
      });
      const before = double.count('create', 'pods');
      const r = await run(s, { code: 'print(1)' });
      await ns.core.deleteNamespacedResourceQuota({ name: 'no-pods', namespace: ns.name });
      assert.equal(r.state, 'error');
      assert.equal(r.result.reason, 'backend_unavailable');
      assert.match(
        r.result.message,
        /forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=\d+, limited: pods=0/,
      );
      assert.equal(double.count('create', 'pods') - before, 1, 'one attempt');
      await until('the quota to be gone', async () =>
        (await ns.core.listNamespacedResourceQuota({ namespace: ns.name })).items.length === 0 ? true : null,
      );
    },
  );

  await t.test(
    'a workspace over its emptyDir sizeLimit (the session disk quota) is evicted: failed, disk_quota',
    async () => {
      const r = await run(s, { code: 'import time\nopen("big.bin", "wb").write(b"x" * (64 << 20))\ntime.sleep(30)' });
      assert.equal(r.result.state, 'failed', JSON.stringify(r.result));
      assert.equal(r.result.reason, 'disk_quota');
      assert.match(r.result.message, /disk quota/);
    },
  );

  await t.test("a Pod deleted behind sandgate's back ends the run as error, backend_unavailable", async () => {
    const created = await s.api('POST', '/v1/executions', {
      language: 'python',
      code: 'import time\nprint("up", flush=True)\ntime.sleep(60)',
    });
    const id = created.body.id as string;
    const runnerUp = async () => {
      const pods = await ns.pods(`org.sandgate.execution=${id}`);
      return pods[0]?.status?.containerStatuses?.some((c) => c.name === 'runner' && c.state?.running) === true;
    };
    await until('its runner to be running', runnerUp, 30_000);
    await ns.deletePod(podName(id));
    const ended = await s.api('GET', `/v1/executions/${id}?wait=60`);
    assert.equal(ended.body.state, 'error');
    assert.equal(ended.body.result.reason, 'backend_unavailable');
    assert.match(ended.body.result.message, /deleted/);
  });

  await t.test(
    'an API server that refuses the worker makes /readyz 503 with its words, until it answers again',
    async () => {
      const readyz = (status: number) => async () => {
        const r = await s.api('GET', '/readyz');
        return r.status === status ? r : null;
      };
      assert.equal((await until('ready', readyz(200))).body.checks.workers_usable, '1');
      // The worker's RoleBinding taken away: the real authorizer refuses its calls.
      const rbac = (await import('@kubernetes/client-node')).RbacAuthorizationV1Api;
      const api = ns.cluster.admin.makeApiClient(rbac);
      const binding = (await api.listNamespacedRoleBinding({ namespace: ns.name })).items[0]!;
      await api.deleteNamespacedRoleBinding({ name: binding.metadata!.name!, namespace: ns.name });
      const forbidden =
        `pods is forbidden: User "system:serviceaccount:${ns.name}:${WORKER_SERVICE_ACCOUNT}" cannot list ` +
        `resource "pods" in API group "" in the namespace "${ns.name}"`;
      const refused = await until('the worker to report the refusal', readyz(503));
      assert.equal(
        refused.body.detail,
        `redis: ok; live workers: 1, with a usable backend: 0 (kubernetes: API server answered 403: ${forbidden})`,
      );
      const { metadata, roleRef, subjects } = binding;
      await api.createNamespacedRoleBinding({
        namespace: ns.name,
        body: {
          metadata: { name: metadata!.name!, labels: metadata!.labels ?? {} },
          roleRef,
          subjects: subjects ?? [],
        },
      });
      assert.equal((await until('ready again', readyz(200))).body.checks.workers_usable, '1');
    },
  );

  await t.test('a health probe that gets no answer says so within its timeout', async () => {
    // A namespace of its own (where it may not even list), so that the worker's calls do not meet the fault.
    const backend = kubernetesBackendOf(s, t, { namespace: 'unanswered' });
    double.faults.inject({
      match: { verb: 'list', resource: 'pods', path: /\/namespaces\/unanswered\// },
      action: FAULTS.hang(),
    });
    const started = Date.now();
    assert.deepEqual(await backend.health(300), {
      usable: false,
      reason: 'API server did not answer within 300 ms',
    });
    assert.ok(Date.now() - started < 2000, `answered after ${Date.now() - started} ms`);
  });
});

test("kubernetes: stage cannot reach the gateway: the run fails as the platform's fault, with stage's reason", async (t) => {
  // A gateway URL the node's firewall drops (a port on this host no stack opened): stage cannot fetch the files.
  const { podGateway } = await kubeCluster();
  const s = await startStack({
    backend: 'kubernetes',
    // Waited out after SANDGATE_K8S_TRANSFER_TIMEOUT_S.
    env: {
      ...ONE_POD_EACH,
      SANDGATE_K8S_GATEWAY_URL: `http://${podGateway}:9`,
      SANDGATE_K8S_TRANSFER_TIMEOUT_S: '3',
    },
  });
  t.after(() => s.close());
  // stdin makes the Pod stage it (an empty session without stdin has no stage).
  const r = await run(s, { code: 'print("never")', stdin: 'input' });
  assert.equal(r.state, 'error');
  assert.equal(r.result.reason, 'backend_unavailable');
  assert.match(r.result.message, /could not fetch the session's files/);
  assert.equal(r.result.stdout, '');
});

test("kubernetes: an image that can never start fails at once with the kubelet's reason", async (t) => {
  const s = await startStack({ backend: 'kubernetes', env: { ...ONE_POD_EACH, SANDGATE_IMAGE: 'Not A Valid:Image' } });
  t.after(() => s.close());
  const r = await run(s, { code: 'print(1)' });
  assert.equal(r.state, 'error');
  assert.equal(r.result.reason, 'backend_unavailable');
  assert.match(r.result.message, /InvalidImageName/);
});

test("kubernetes: a Pod no node can take fails the run at the startup deadline, with the scheduler's words", async (t) => {
  // The namespace's Pods get a node selector no node matches (admission plugin PodNodeSelector).
  const s = await startStack({
    backend: 'kubernetes',
    cluster: { annotations: { 'scheduler.alpha.kubernetes.io/node-selector': 'sandgate.test/no-such-node=true' } },
    env: { ...ONE_POD_EACH, SANDGATE_K8S_STARTUP_TIMEOUT_S: '3' },
  });
  t.after(() => s.close());
  const r = await run(s, { code: 'print("never")' });
  assert.equal(r.state, 'error');
  assert.equal(r.result.reason, 'backend_unavailable');
  assert.match(
    r.result.message,
    /did not start within 3000 ms: 0\/1 nodes are available: 1 node\(s\) didn't match Pod's node affinity\/selector/,
  );
  await until('the Pod to be deleted', async () => (await s.sandboxesOf(r.id)) === 0);
});
