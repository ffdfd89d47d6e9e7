import { test } from 'node:test';
import assert from 'node:assert/strict';
import type * as k8s from '@kubernetes/client-node';
import type { ExecutionJob } from '@sandgate/contracts';
import { validateManifest } from '@sandgate/k8s-double';
import {
  AGENT_TOKEN_ANNOTATION,
  SERVICES_TOKEN_ANNOTATION,
  CONTAINERS,
  madeWithLimits,
  podName,
  sandboxResources,
  sandboxPod,
  secretName,
  sessionPod,
  sessionPodName,
  transferSecret,
  type PodSettings,
} from './pod-spec.ts';

const SETTINGS: PodSettings = {
  image: 'sandgate/runtime:1',
  helperImage: 'sandgate/runtime:1',
  runtimeClassName: 'gvisor',
  deployment: 'prod',
  workspaceBytes: 1 << 30,
  tmpfsBytes: 64 << 20,
  maxOutputBytes: 100_000,
  harvestGraceMs: 30_000,
  startupAllowanceMs: 180_000,
  agentPort: 8700,
  servicesPort: 8701,
  volumesPort: 8702,
  transferTimeoutS: 60,
  cpuRequestRatio: 0.25,
};
const JOB: ExecutionJob = {
  execution_id: 'exec_0123456789abcdef',
  tenant: 'acme',
  session_id: 'sess_0123456789abcdef',
  language: 'python',
  code: 'print("hi")',
  timeout_ms: 30_000,
  memory_mb: 512,
  cpus: 1,
  env: { MODE: 'test' },
  stdin: 'input',
  sandbox: 'oneshot',
  generation: 0,
};

const all = (pod: k8s.V1Pod): k8s.V1Container[] => [...(pod.spec!.initContainers ?? []), ...pod.spec!.containers];

test('names are valid DNS-1123 labels, deterministic per execution, and distinct for ids that differ only in case or _', () => {
  const names = [
    'exec_0123456789abcdef',
    'EXEC_0123456789ABCDEF',
    'exec-0123456789abcdef',
    `exec_${'x'.repeat(200)}`,
  ].map(podName);
  for (const n of [...names, ...names.map((n) => `${n}-0123456789abcdef`)]) {
    assert.match(n, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, n);
    assert.ok(n.length <= 63 + 17, n);
  }
  assert.ok(names.every((n) => n.length <= 63));
  assert.equal(new Set(names).size, names.length);
  assert.equal(podName(JOB.execution_id), podName(JOB.execution_id));
  assert.equal(secretName(JOB.execution_id, '0123456789abcdef'), `${podName(JOB.execution_id)}-0123456789abcdef`);
});

test('the Pod: exec-free, no token, every container non-root with a read-only root and no capability', async () => {
  const pod = sandboxPod(JOB, SETTINGS, 'attempt1');
  const spec = pod.spec!;
  assert.equal(spec.restartPolicy, 'Never');
  assert.equal(spec.automountServiceAccountToken, false);
  assert.equal(spec.enableServiceLinks, false);
  assert.equal(spec.runtimeClassName, 'gvisor');
  assert.equal(spec.securityContext?.seccompProfile?.type, 'RuntimeDefault');
  assert.ok(
    spec.activeDeadlineSeconds! > (JOB.timeout_ms + SETTINGS.startupAllowanceMs) / 1000,
    'the deadline covers startup and the run',
  );
  for (const c of all(pod)) {
    const sc = c.securityContext!;
    assert.equal(sc.runAsNonRoot, true, c.name);
    assert.ok(sc.runAsUser! > 0, c.name);
    assert.equal(sc.readOnlyRootFilesystem, true, c.name);
    assert.equal(sc.allowPrivilegeEscalation, false, c.name);
    assert.deepEqual(sc.capabilities?.drop, ['ALL'], c.name);
    assert.equal(sc.capabilities?.add, undefined, c.name);
  }
  assert.deepEqual(pod.metadata?.labels, {
    'org.sandgate.managed': 'true',
    'org.sandgate.deployment': 'prod',
    'org.sandgate.kind': 'execution',
    'org.sandgate.execution': JOB.execution_id,
    'org.sandgate.session': JOB.session_id,
    'org.sandgate.tenant': 'acme',
  });
  const workspace = spec.volumes!.find((v) => v.name === 'workspace')!;
  assert.equal(workspace.emptyDir?.sizeLimit, '1024Mi', 'the workspace is bounded by the session disk quota');
  assert.equal(spec.volumes!.find((v) => v.name === 'tmp')!.emptyDir?.medium, 'Memory');
  await validateManifest(pod); // throws on anything the API server's schema refuses
});

test('the transfer Secret is mounted into stage and harvest only: the runner, where user code runs, never sees it', () => {
  const pod = sandboxPod(JOB, SETTINGS, 'attempt1');
  const secretVolumes = pod.spec!.volumes!.filter((v) => v.secret !== undefined).map((v) => v.name);
  assert.deepEqual(secretVolumes, ['transfer']);
  const mounting = all(pod)
    .filter((c) => c.volumeMounts?.some((m) => secretVolumes.includes(m.name)))
    .map((c) => c.name);
  assert.deepEqual(mounting.sort(), [CONTAINERS.harvest, CONTAINERS.stage].sort());
  const runner = pod.spec!.containers.find((c) => c.name === CONTAINERS.runner)!;
  assert.deepEqual(runner.env, [{ name: 'MODE', value: 'test' }], "only the job's variables, no envFrom");
  assert.equal(runner.envFrom, undefined);
  assert.ok(all(pod).every((c) => !JSON.stringify(c).includes('secretKeyRef')));
  assert.deepEqual(runner.resources?.limits, { memory: '512Mi', cpu: '1' });
});

test('resources: memory requested as limited, CPU requested as the configured share of the limit (at least 1m)', () => {
  assert.deepEqual(sandboxResources({ memory_mb: 512, cpus: 1 }, 0.25), {
    limits: { memory: '512Mi', cpu: '1' },
    requests: { memory: '512Mi', cpu: '250m' },
  });
  assert.deepEqual(sandboxResources({ memory_mb: 384, cpus: 0.5 }, 1).requests, { memory: '384Mi', cpu: '500m' });
  assert.equal(sandboxResources({ memory_mb: 64, cpus: 0.01 }, 0.01).requests!.cpu, '1m');
  const runner = sandboxPod({ ...JOB, cpus: 2 }, { ...SETTINGS, cpuRequestRatio: 0.1 }, 'a').spec!.containers[0]!;
  assert.deepEqual(runner.resources!.requests, { memory: '512Mi', cpu: '200m' });
});

test('the Secret carries the grant and stdin, and is owned by its Pod', async () => {
  const pod = {
    ...sandboxPod(JOB, SETTINGS, 'a'),
    metadata: { ...sandboxPod(JOB, SETTINGS, 'a').metadata, uid: 'u-1' },
  };
  const secret = transferSecret(JOB, pod, SETTINGS, 'http://gateway:8080', 'tok');
  assert.deepEqual(secret.metadata?.ownerReferences, [
    { apiVersion: 'v1', kind: 'Pod', name: podName(JOB.execution_id), uid: 'u-1' },
  ]);
  assert.deepEqual(secret.stringData, { url: 'http://gateway:8080', token: 'tok', timeout: '60', stdin: 'input' });
  assert.deepEqual(transferSecret({ ...JOB, stdin: null }, pod, SETTINGS, 'http://g', 't').stringData, {
    url: 'http://g',
    token: 't',
    timeout: '60',
  });
  await validateManifest(secret);
});

test('a run with nothing to fetch (an empty session, no stdin) has no stage; harvest still has the grant', () => {
  const pod = sandboxPod({ ...JOB, stdin: null }, SETTINGS, 'attempt1', { stage: false });
  assert.equal(pod.spec!.initContainers, undefined);
  const harvest = pod.spec!.containers.find((c) => c.name === CONTAINERS.harvest)!;
  assert.ok(harvest.volumeMounts!.some((m) => m.name === 'transfer'));
  assert.deepEqual(
    pod.spec!.containers.map((c) => c.name),
    [CONTAINERS.runner, CONTAINERS.harvest],
  );
});

test("a session Pod: valid, one locked-down container, the agent on its ports, only the tokens' hashes in its spec", async () => {
  const job: ExecutionJob = { ...JOB, sandbox: 'stateful', session_id: 'sess_ABC_def', generation: 3 };
  const token = 'a-token-of-the-pod';
  const servicesToken = 'a-services-token';
  const pod = sessionPod(job, SETTINGS, { token, servicesToken, replaces: true });
  await validateManifest(pod); // throws on anything the API server's schema refuses
  assert.equal(pod.metadata!.name, sessionPodName('sess_ABC_def'));
  assert.match(pod.metadata!.name!, /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
  assert.equal(pod.metadata!.labels!['org.sandgate.kind'], 'session');
  assert.equal(pod.metadata!.labels!['org.sandgate.generation'], '3');
  assert.equal(pod.metadata!.labels!['org.sandgate.replaces'], 'true');
  assert.equal(pod.metadata!.annotations![AGENT_TOKEN_ANNOTATION], token);
  assert.equal(pod.metadata!.annotations![SERVICES_TOKEN_ANNOTATION], servicesToken);
  const spec = pod.spec!;
  assert.equal(spec.automountServiceAccountToken, false);
  assert.equal(spec.enableServiceLinks, false);
  assert.equal(spec.restartPolicy, 'Never');
  assert.equal(spec.runtimeClassName, 'gvisor');
  assert.equal(spec.initContainers, undefined);
  assert.ok(!spec.volumes!.some((v) => v.secret), 'no Secret at all');
  assert.equal(spec.volumes!.find((v) => v.name === 'workspace')!.emptyDir!.sizeLimit, '1024Mi');
  const [agent, ...others] = spec.containers;
  assert.equal(others.length, 0);
  assert.deepEqual(agent!.ports, [
    { name: 'agent', containerPort: 8700, protocol: 'TCP' },
    { name: 'services', containerPort: 8701, protocol: 'TCP' },
  ]);
  assert.ok(agent!.command!.includes('--listen=8700'));
  assert.ok(agent!.command!.includes('--services-port=8701'));
  assert.ok(agent!.command!.includes('--prewarm=interpreter'), 'stateful: the agent starts its interpreter');
  const sc = agent!.securityContext!;
  assert.equal(sc.runAsNonRoot, true);
  assert.equal(sc.readOnlyRootFilesystem, true);
  assert.equal(sc.allowPrivilegeEscalation, false);
  assert.deepEqual(sc.capabilities, { drop: ['ALL'] });
  assert.deepEqual(
    agent!.env!.map((e) => e.name),
    ['SANDGATE_AGENT_TOKEN_SHA256', 'SANDGATE_SERVICES_TOKEN_SHA256'],
  );
  assert.ok(!JSON.stringify(spec).includes(token), 'the token itself is only in the annotation');
  assert.ok(!JSON.stringify(spec).includes(servicesToken), 'so is the services token');
  assert.deepEqual(agent!.resources!.limits, { memory: `${job.memory_mb}Mi`, cpu: String(job.cpus) });
  assert.equal(agent!.resources!.requests!.cpu, '250m');
  // Its limits are told by what the worker wrote, not by the API server's canonical quantities ("1Gi" for 1024Mi).
  const canonical = {
    ...pod,
    spec: { ...spec, containers: [{ ...agent!, resources: { limits: { memory: '1Gi' } } }] },
  };
  assert.ok(madeWithLimits(canonical, job));
  assert.ok(!madeWithLimits(pod, { ...job, memory_mb: 1024 }));
  assert.ok(!madeWithLimits(pod, { ...job, cpus: 0.5 }));
  const process = sessionPod({ ...job, sandbox: 'session' }, SETTINGS, { token, servicesToken, replaces: false });
  assert.ok(process.spec!.containers[0]!.command!.includes('--prewarm=always'));
  assert.equal(process.metadata!.labels!['org.sandgate.replaces'], undefined);
  assert.equal(process.metadata!.labels!['org.sandgate.network'], undefined);
  assert.ok(!JSON.stringify(process.spec).includes('SANDGATE_EGRESS'), 'no network, no relay');
  // A session with egress: labelled so, and its agent relays the proxy port to the worker's parked connections.
  const egress = sessionPod({ ...job, network: 'egress' }, SETTINGS, { token, servicesToken, replaces: false });
  await validateManifest(egress);
  assert.equal(egress.metadata!.labels!['org.sandgate.network'], 'egress');
  assert.deepEqual(
    egress.spec!.containers[0]!.env!.find((e) => e.name === 'SANDGATE_EGRESS_VIA_AGENT'),
    { name: 'SANDGATE_EGRESS_VIA_AGENT', value: '1' },
  );
});

test("a session Pod with volumes: an emptyDir each at its size, read-only in the agent's container where asked, read-write only in the volumes container", async () => {
  const volumes = [
    { id: 'vol_0123456789ab', name: 'data', path: '/mnt/volumes/data', read_only: false, size_bytes: 3 << 20 },
    { id: 'vol_ba9876543210', name: 'ref', path: '/mnt/volumes/ref/set', read_only: true, size_bytes: 1 << 30 },
  ];
  const token = 'a-token-of-the-pod';
  const job: ExecutionJob = { ...JOB, sandbox: 'session', volumes };
  const pod = sessionPod(job, SETTINGS, { token, servicesToken: 's', replaces: false });
  await validateManifest(pod);
  const spec = pod.spec!;
  assert.deepEqual(
    spec.volumes!.filter((v) => v.name.startsWith('volume-')),
    [
      { name: 'volume-0', emptyDir: { sizeLimit: '3Mi' } },
      { name: 'volume-1', emptyDir: { sizeLimit: '1024Mi' } },
    ],
  );
  const [agent, files, ...others] = spec.containers;
  assert.equal(others.length, 0);
  assert.deepEqual(
    agent!.volumeMounts!.filter((m) => m.name.startsWith('volume-')),
    [
      { name: 'volume-0', mountPath: '/mnt/volumes/data', readOnly: false },
      { name: 'volume-1', mountPath: '/mnt/volumes/ref/set', readOnly: true },
    ],
  );
  assert.equal(files!.name, 'volumes');
  assert.deepEqual(files!.volumeMounts, [
    { name: 'volume-0', mountPath: '/mnt/volumes/data' },
    { name: 'volume-1', mountPath: '/mnt/volumes/ref/set' },
  ]);
  assert.ok(files!.command!.includes('--listen=8702'));
  assert.ok(files!.command!.includes('--root=/mnt/volumes/ref/set'));
  assert.deepEqual(files!.ports, [{ name: 'volumes', containerPort: 8702, protocol: 'TCP' }]);
  assert.deepEqual(files!.securityContext, agent!.securityContext, 'locked down as the agent is');
  assert.deepEqual(
    files!.env!.map((e) => e.name),
    ['SANDGATE_AGENT_TOKEN_SHA256'],
  );
  assert.ok(!JSON.stringify(spec).includes(token), 'the token itself is only in the annotation');
  // Without volumes, no volumes container.
  assert.equal(
    sessionPod({ ...job, volumes: [] }, SETTINGS, { token, servicesToken: 's', replaces: false }).spec!.containers
      .length,
    1,
  );
});
