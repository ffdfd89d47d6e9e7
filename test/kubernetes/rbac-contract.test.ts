import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as k8s from '@kubernetes/client-node';
import type { EventSink } from '@sandgate/backends';
import { podName, secretName } from '@sandgate/backends/testing';
import type { ExecutionJob } from '@sandgate/contracts';
import { renderChart } from './helm.ts';
import { startStack, until } from '../harness.ts';
import { kubernetesBackendOf } from './backend-of.ts';

const sink = (): EventSink & { out: string[] } => {
  const out: string[] = [];
  return { out, phase: () => {}, stdout: (t) => out.push(t), stderr: () => {}, artifact: () => {} };
};

/**
 * The chart's Role against the Kubernetes backend's real calls, both ways: the API server's RBAC authorizer enforces
 * the Role the chart renders (any other call is a 403), and the backend's runs, retries of a run whose worker died,
 * check, health probe and sweep use every verb the Role grants. A verb the backend stops using, or starts to need,
 * fails this test. Pods are followed by one watch (list, then watch) and read only to look at a leftover. Secrets are
 * created, and never replaced, read, listed or deleted: each is named by its attempt and owned by its Pod, and the
 * garbage collector removes it with the Pod.
 */
test('kubernetes: the chart Role grants exactly the calls the backend makes', async (t) => {
  const ms = await renderChart({ values: { redis: { url: 'redis://r:6379' } }, name: 'sg', namespace: 'sandgate' });
  const rules = ms.find((m) => m.kind === 'Role')!.rules as { resources?: string[]; verbs: string[] }[];
  const s = await startStack({ backend: 'kubernetes', worker: false });
  t.after(() => s.close());
  const ns = s.cluster!;
  const backend = kubernetesBackendOf(s, t);
  const kubeConfig = new k8s.KubeConfig();
  kubeConfig.loadFromOptions(ns.kubeconfig);
  const job = (id: string): ExecutionJob => ({
    execution_id: id,
    tenant: 'acme',
    session_id: `sess_${id.slice(-12)}`,
    language: 'python',
    code: 'print("ran")',
    timeout_ms: 10_000,
    memory_mb: 128,
    cpus: 0.5,
    env: {},
    stdin: null,
    sandbox: 'oneshot',
    generation: 0,
  });
  const labels = (id: string) => ({
    'org.sandgate.managed': 'true',
    'org.sandgate.deployment': s.config.redisPrefix,
    'org.sandgate.kind': 'execution',
    'org.sandgate.execution': id,
  });
  const core = kubeConfig.makeApiClient(k8s.CoreV1Api);
  const leftoverPod = (id: string) =>
    core.createNamespacedPod({
      namespace: ns.name,
      body: {
        metadata: { name: podName(id), labels: labels(id) },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          containers: [
            {
              name: 'runner',
              image: 'sandgate/runtime:1',
              command: ['sleep', '30'],
              securityContext: {
                runAsNonRoot: true,
                runAsUser: 1000,
                allowPrivilegeEscalation: false,
                capabilities: { drop: ['ALL'] },
                seccompProfile: { type: 'RuntimeDefault' },
              },
            },
          ],
        },
      },
    });

  await backend.check();
  // The health probe needs no verb of its own (here it answers from check's call, made just before).
  assert.deepEqual(await backend.health(5000), { usable: true });
  // A retry of an execution whose worker died after making its Pod and Secret: the leftover Pod is read and deleted
  // (that very one, by uid); the leftover Secret, an earlier attempt's, is no concern of the new one (its own Secret
  // is named by its attempt), and goes with its Pod.
  const retried = 'exec_aaaaaaaaaaaaaaa1';
  const left = await leftoverPod(retried);
  const owner = { apiVersion: 'v1', kind: 'Pod', name: podName(retried), uid: left.metadata!.uid! };
  await core.createNamespacedSecret({
    namespace: ns.name,
    body: {
      metadata: { name: secretName(retried, 'e0e0e0e0e0e0e0e0'), labels: labels(retried), ownerReferences: [owner] },
      stringData: { token: 'old' },
    },
  });
  const events = sink();
  const result = await backend.execute(job(retried), events, new AbortController().signal);
  assert.equal(result.state, 'completed', JSON.stringify(result));
  assert.equal(events.out.join(''), 'ran\n');
  // What a worker that died left: a Pod no live execution owns. Sweep removes it (its Secret goes with it).
  const dead = 'exec_aaaaaaaaaaaaaaa2';
  await leftoverPod(dead);
  // Sweep looks through the worker's watch of its Pods: once that has seen this one.
  await until('the watch to see the dead Pod', async () => backend.watch.get(podName(dead)) !== undefined);
  const swept = await backend.sweep({ executions: new Set(), sessions: new Set(), workers: new Set() });
  assert.deepEqual(swept.removed, [dead]);

  const denied = (await ns.calls()).filter((c) => c.status === 403).map((c) => `${c.verb} ${c.resource}`);
  assert.deepEqual(denied, [], 'every call the backend made is allowed by the Role');
  const granted = rules.flatMap((r) => (r.resources ?? []).flatMap((res) => r.verbs.map((v) => `${v} ${res}`))).sort();
  // The test's own setup calls (creating leftovers) are made with the same identity; the backend's own calls are
  // the rest, so both sets are compared against what the backend recorded itself.
  const used = [...backend.api.calls.keys()].sort();
  // Its calls share kept-alive connections (the client alone makes a new TLS connection for every request).
  const made = [...backend.api.calls.values()].reduce((a, b) => a + b, 0);
  assert.ok(made >= 10 && backend.api.connections <= 3, `${backend.api.connections} connections for ${made} calls`);
  assert.deepEqual(used, granted, 'the backend uses every verb the Role grants, and only those');
});
