import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DEFAULT_AGENT_PORT,
  DEFAULT_SERVICES_PORT,
  DEFAULT_VOLUMES_PORT,
  ownershipLabels,
  poolLabels,
  sessionLabels,
} from '@sandgate/backends/testing';
import { labelSelectorMatches, podSecurityViolations, validateManifest, type PolicyRule } from '@sandgate/k8s-double';
import { HelmError, lintChart, renderChart, type Manifest } from './kubernetes/helm.ts';

const REDIS = { redis: { url: 'redis://redis.data.svc:6379' } };
/** The RBAC contract of the exec-free backend: exactly these verbs, nothing else. */
const CONTRACT = {
  pods: ['create', 'delete', 'get', 'list', 'watch'],
  'pods/log': ['get'],
  secrets: ['create'],
};

const find = (ms: Manifest[], kind: string, nameEnd = ''): Manifest[] =>
  ms.filter((m) => m.kind === kind && m.metadata.name.endsWith(nameEnd));
const one = (ms: Manifest[], kind: string, nameEnd = ''): Manifest => {
  const found = find(ms, kind, nameEnd);
  assert.equal(found.length, 1, `one ${kind} *${nameEnd}, got ${found.map((m) => m.metadata.name).join(', ')}`);
  return found[0]!;
};
type PodSpecLike = {
  containers: { name: string; securityContext?: object; volumeMounts?: { mountPath: string }[] }[];
  volumes?: object[];
  automountServiceAccountToken?: boolean;
  serviceAccountName?: string;
  securityContext?: object;
};
const podSpec = (d: Manifest): PodSpecLike => (d.spec as { template: { spec: PodSpecLike } }).template.spec;

/** Verbs granted per resource by a Role's rules, sorted. */
function grants(rules: PolicyRule[]): Record<string, string[]> {
  const out: Record<string, Set<string>> = {};
  for (const r of rules) for (const res of r.resources ?? []) for (const v of r.verbs) (out[res] ??= new Set()).add(v);
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, [...v].sort()]));
}

/** The invariants that hold for every set of values. */
async function checkInvariants(ms: Manifest[]): Promise<void> {
  for (const m of ms) await validateManifest(m);
  for (const d of find(ms, 'Deployment')) {
    const spec = podSpec(d);
    assert.deepEqual(
      podSecurityViolations(spec as never, 'restricted'),
      [],
      `${d.metadata.name} passes Pod Security "restricted"`,
    );
    for (const c of spec.containers) {
      assert.deepEqual(
        c.securityContext,
        {
          runAsNonRoot: true,
          runAsUser: 1000,
          runAsGroup: 1000,
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
          seccompProfile: { type: 'RuntimeDefault' },
        },
        `${d.metadata.name}/${c.name}`,
      );
      assert.ok(!(c.volumeMounts ?? []).some((v) => v.mountPath.includes('docker.sock')), 'no Docker socket');
    }
    assert.ok(!(spec.volumes ?? []).some((v) => 'hostPath' in v), `${d.metadata.name} has no hostPath volume`);
  }
  const gateway = podSpec(one(ms, 'Deployment', '-gateway'));
  assert.equal(gateway.automountServiceAccountToken, false, 'the gateway carries no API token');
  const worker = podSpec(one(ms, 'Deployment', '-worker'));
  const role = one(ms, 'Role');
  const rules = role.rules as PolicyRule[];
  assert.deepEqual(grants(rules), expectedGrants(ms), 'the Role grants exactly the contract');
  for (const r of rules) {
    assert.deepEqual(r.apiGroups, [''], 'core API group only');
    assert.ok(!r.verbs.includes('*') && !(r.resources ?? []).some((x) => x.includes('*')), 'no wildcards');
    assert.ok(
      !(r.resources ?? []).some((x) => /^pods\/(exec|attach|portforward)$/.test(x)),
      'no exec, attach or portforward',
    );
    assert.equal(r.resourceNames, undefined);
  }
  const binding = one(ms, 'RoleBinding');
  assert.equal(binding.metadata.namespace, role.metadata.namespace);
  assert.deepEqual(
    (binding.subjects as { name: string }[]).map((s) => s.name),
    [worker.serviceAccountName],
  );
}

function expectedGrants(ms: Manifest[]): Record<string, string[]> {
  const events = (one(ms, 'Role').rules as PolicyRule[]).some((r) => r.resources?.includes('events'));
  return events ? { ...CONTRACT, events: ['list'] } : CONTRACT;
}

/** `helm lint --strict` passes: no warning either (its report ends with the count of failed charts). */
async function lintsClean(options: Parameters<typeof lintChart>[0]): Promise<void> {
  const report = await lintChart(options);
  assert.match(report, /1 chart\(s\) linted, 0 chart\(s\) failed/);
  assert.doesNotMatch(report, /\[(WARNING|ERROR)\]/, report);
}

test('helm chart, default values: schema-valid objects, RBAC is the exact contract, sandboxes fenced', async () => {
  await lintsClean({ values: REDIS, namespace: 'apps' });
  const ms = await renderChart({ values: REDIS, name: 'sg', namespace: 'apps' });
  assert.deepEqual([...new Set(ms.map((m) => m.kind))].sort(), [
    'ConfigMap',
    'Deployment',
    'NetworkPolicy',
    'PersistentVolumeClaim',
    'PodDisruptionBudget',
    'Role',
    'RoleBinding',
    'Secret',
    'Service',
    'ServiceAccount',
  ]);
  await checkInvariants(ms);
  const config = one(ms, 'ConfigMap').data as Record<string, string>;
  assert.equal(config.SANDGATE_BACKEND, 'kubernetes');
  assert.equal(config.SANDGATE_K8S_NAMESPACE, 'apps');
  assert.equal(config.SANDGATE_K8S_GATEWAY_URL, 'http://sg-sandgate-gateway.apps.svc:80');
  assert.equal(config.SANDGATE_K8S_RUNTIME_CLASS, '');
  assert.equal(config.SANDGATE_K8S_HELPER_IMAGE, config.SANDGATE_IMAGE, 'stage and harvest run the runtime image');
  const pvc = one(ms, 'PersistentVolumeClaim');
  assert.deepEqual((pvc.spec as { accessModes: string[] }).accessModes, ['ReadWriteMany']);
  for (const d of find(ms, 'Deployment')) {
    assert.ok(
      (podSpec(d).volumes as { persistentVolumeClaim?: { claimName: string } }[]).some(
        (v) => v.persistentVolumeClaim?.claimName === 'sg-sandgate-data',
      ),
      `${d.metadata.name} mounts the shared claim`,
    );
  }

  // The network policies select what the backend labels: every sandbox of this deployment, and session/pool ones.
  const [egress, ingress] = [one(ms, 'NetworkPolicy', '-sandbox-egress'), one(ms, 'NetworkPolicy', '-session-ingress')];
  const job = { execution_id: 'exec_1', session_id: 'sess_1', tenant: 't' };
  const execution = ownershipLabels(job, 'sandgate');
  const session = sessionLabels({ session_id: 'sess_1', tenant: 't', generation: 0 }, 'sandgate', false);
  const pool = poolLabels('sandgate', 'worker-1');
  const sel = (p: Manifest) => (p.spec as { podSelector: Parameters<typeof labelSelectorMatches>[0] }).podSelector;
  assert.ok(labelSelectorMatches(sel(egress), execution));
  for (const labels of [session, pool])
    assert.ok(!labelSelectorMatches(sel(egress), labels), `no egress to the gateway: ${JSON.stringify(labels)}`);
  assert.ok(
    !labelSelectorMatches(sel(egress), ownershipLabels(job, 'another-deployment')),
    'another deployment is not ours',
  );
  assert.ok(labelSelectorMatches(sel(ingress), session) && labelSelectorMatches(sel(ingress), pool));
  assert.ok(!labelSelectorMatches(sel(ingress), execution), 'one-shot Pods take no ingress at all');
  const agentPolicy = ingress.spec as {
    policyTypes: string[];
    egress: unknown[];
    ingress: { ports: { port: number }[] }[];
  };
  assert.deepEqual(agentPolicy.policyTypes, ['Ingress', 'Egress']);
  assert.deepEqual(agentPolicy.egress, [], 'session and pool Pods reach nothing');
  assert.equal(
    agentPolicy.ingress[0]!.ports[0]!.port,
    DEFAULT_AGENT_PORT,
    'the port the backend makes session Pods listen on',
  );
  const eSpec = egress.spec as {
    policyTypes: string[];
    ingress: unknown[];
    egress: { to: { podSelector: { matchLabels: object } }[]; ports: { port: number }[] }[];
  };
  assert.deepEqual(eSpec.policyTypes, ['Ingress', 'Egress']);
  assert.deepEqual(eSpec.ingress, []);
  assert.deepEqual(eSpec.egress[0]!.to[0]!.podSelector.matchLabels, {
    'app.kubernetes.io/name': 'sandgate',
    'app.kubernetes.io/instance': 'sg',
    'app.kubernetes.io/component': 'gateway',
  });
  assert.deepEqual(eSpec.egress[0]!.ports, [{ protocol: 'TCP', port: 8080 }]);
  assert.deepEqual(
    eSpec.egress.flatMap((e) => e.ports.map((p) => p.port)),
    [8080, 53, 53],
    'the gateway and DNS, nothing else',
  );
  const iSpec = ingress.spec as {
    ingress: { from: { podSelector: { matchLabels: object } }[]; ports: { port: number }[] }[];
  };
  assert.deepEqual(iSpec.ingress[0]!.from[0]!.podSelector.matchLabels, {
    'app.kubernetes.io/name': 'sandgate',
    'app.kubernetes.io/instance': 'sg',
    'app.kubernetes.io/component': 'worker',
  });
  assert.deepEqual(
    iSpec.ingress[0]!.ports,
    [
      { protocol: 'TCP', port: 8700 },
      { protocol: 'TCP', port: DEFAULT_VOLUMES_PORT },
    ],
    "the workers reach the agent, and a session Pod's volumes container on the port the backend makes it serve on",
  );
  assert.deepEqual(iSpec.ingress[1]!.from[0]!.podSelector.matchLabels, {
    'app.kubernetes.io/name': 'sandgate',
    'app.kubernetes.io/instance': 'sg',
    'app.kubernetes.io/component': 'gateway',
  });
  assert.deepEqual(
    iSpec.ingress[1]!.ports,
    [{ protocol: 'TCP', port: DEFAULT_SERVICES_PORT }],
    "the gateway reaches the session's services, on the port the backend makes session Pods serve them",
  );
  assert.equal(iSpec.ingress.length, 2, 'workers to the agent, the gateway to the services; nothing else');
});

test('helm chart, other values: sandbox namespace, gVisor, autoscaling, quota, existing secrets/claim', async () => {
  const values = {
    redis: { existingSecret: 'redis-creds', prefix: 'prod' },
    auth: { existingSecret: 'sandgate-keys' },
    gateway: { replicas: 3 },
    worker: { autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 20, waitingPerWorker: '2' } },
    sandbox: {
      namespace: 'sandgate-sandboxes',
      createNamespace: true,
      runtimeClassName: 'gvisor',
      runtimeClass: { create: true },
      maxPods: 50,
    },
    rbac: { readEvents: true },
    persistence: { existingClaim: 'shared-files' },
    networkPolicy: { dns: { enabled: false } },
    env: { SANDGATE_EXEC_TIMEOUT_S: '120' },
  };
  await lintsClean({ values, namespace: 'sandgate' });
  const ms = await renderChart({ name: 'prod', namespace: 'sandgate', values });
  await checkInvariants(ms);
  assert.equal(find(ms, 'Secret').length, 0, 'existing secrets are used, none created');
  assert.equal(find(ms, 'PersistentVolumeClaim').length, 0);
  const ns = one(ms, 'Namespace');
  assert.equal(ns.metadata.name, 'sandgate-sandboxes');
  assert.equal(ns.metadata.labels?.['pod-security.kubernetes.io/enforce'], 'restricted');
  assert.equal(one(ms, 'RuntimeClass').handler, 'runsc');
  assert.equal(one(ms, 'Role').metadata.namespace, 'sandgate-sandboxes');
  assert.deepEqual((one(ms, 'RoleBinding').subjects as object[])[0], {
    kind: 'ServiceAccount',
    name: 'prod-sandgate-worker',
    namespace: 'sandgate',
  });
  assert.deepEqual(grants(one(ms, 'Role').rules as PolicyRule[]).events, ['list']);
  assert.equal(one(ms, 'ResourceQuota').metadata.namespace, 'sandgate-sandboxes');
  for (const p of find(ms, 'NetworkPolicy')) assert.equal(p.metadata.namespace, 'sandgate-sandboxes');
  const egress = one(ms, 'NetworkPolicy', '-sandbox-egress').spec as {
    podSelector: { matchLabels: Record<string, string> };
    egress: unknown[];
  };
  assert.equal(egress.podSelector.matchLabels['org.sandgate.deployment'], 'prod');
  assert.equal(egress.egress.length, 1, 'no DNS rule when disabled');
  const config = one(ms, 'ConfigMap').data as Record<string, string>;
  assert.equal(config.SANDGATE_K8S_RUNTIME_CLASS, 'gvisor');
  assert.equal(config.SANDGATE_K8S_NAMESPACE, 'sandgate-sandboxes');
  assert.equal(config.SANDGATE_EXEC_TIMEOUT_S, '120');
  assert.equal(config.SANDGATE_POOL_SIZE, '2', 'warm pool Pods per worker');
  const worker = one(ms, 'Deployment', '-worker');
  assert.equal((worker.spec as { replicas?: number }).replicas, undefined, 'the HPA owns the replica count');
  const hpa = one(ms, 'HorizontalPodAutoscaler').spec as {
    minReplicas: number;
    maxReplicas: number;
    metrics: { external: object }[];
  };
  assert.equal(hpa.minReplicas, 3);
  assert.equal(hpa.maxReplicas, 20);
  assert.deepEqual(hpa.metrics[0]!.external, {
    metric: { name: 'sandgate_queue_jobs', selector: { matchLabels: { state: 'waiting' } } },
    target: { type: 'AverageValue', averageValue: '2' },
  });
  assert.equal((one(ms, 'Deployment', '-gateway').spec as { replicas: number }).replicas, 3);
  const redisEnv = (
    podSpec(worker).containers[0] as unknown as {
      env: { name: string; valueFrom: { secretKeyRef: { name: string } } }[];
    }
  ).env.find((e) => e.name === 'REDIS_URL');
  assert.equal(redisEnv?.valueFrom.secretKeyRef.name, 'redis-creds');
});

test('helm chart: values that cannot work fail the render with the reason', async () => {
  await assert.rejects(
    renderChart({ values: {} }),
    (e: unknown) => e instanceof HelmError && /redis\.url \(or redis\.existingSecret\) is required/.test(e.message),
  );
  await assert.rejects(
    renderChart({ values: { ...REDIS, persistence: { enabled: false } } }),
    (e: unknown) => e instanceof HelmError && /gateway\.replicas > 1 needs persistence\.enabled/.test(e.message),
  );
  const single = await renderChart({ values: { ...REDIS, gateway: { replicas: 1 }, persistence: { enabled: false } } });
  assert.equal(find(single, 'PodDisruptionBudget', '-gateway').length, 0, 'no PDB for a single replica');
  assert.ok(
    (podSpec(one(single, 'Deployment', '-gateway')).volumes as { emptyDir?: object; name: string }[]).find(
      (v) => v.name === 'data',
    )?.emptyDir,
  );
});
