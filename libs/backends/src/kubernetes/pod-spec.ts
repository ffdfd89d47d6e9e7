import { createHash } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import type { ExecutionJob, JobVolume } from '@sandgate/contracts';
import { programFor, WORKDIR } from '../run/sandbox.ts';
import { ownershipLabels, poolLabels, sessionLabels } from '../housekeeping/labels.ts';
import { SERVICES_TOKEN_ENV, servicesTokenSha256 } from '../services.ts';

/** Where the runtime image keeps the program each sandbox Pod container runs (images/runtime/agent/sandgate_pod.py). */
export const POD_PROGRAM = '/usr/lib/sandgate/agent/sandgate_pod.py';
export const CONTAINERS = { stage: 'stage', runner: 'runner', harvest: 'harvest' } as const;
/** The uid and gid every container of a sandbox Pod runs as: the image's `sandbox` user, never root. */
export const SANDBOX_UID = 1000;
/** Annotation naming the attempt that made a Pod: a worker deletes only Pods of its own attempt. */
export const ATTEMPT_ANNOTATION = 'org.sandgate/attempt';

/** What a sandbox Pod needs beyond the job itself. */
export interface PodSettings {
  image: string;
  /** Image of stage and harvest; they need python3 and sandgate_pod.py, which the runtime image has. */
  helperImage: string;
  runtimeClassName: string | undefined;
  deployment: string;
  /** The workspace emptyDir's sizeLimit (the session disk quota); 0: none. */
  workspaceBytes: number;
  /** Size of the runner's memory-backed /tmp. */
  tmpfsBytes: number;
  maxOutputBytes: number;
  /** How long harvest waits for the runner beyond the run's timeout before it reports what it has. */
  harvestGraceMs: number;
  /** Image pulls, scheduling and stage: part of activeDeadlineSeconds, which counts from the Pod's start. */
  startupAllowanceMs: number;
  /** Where session Pods' agents listen; the chart's NetworkPolicy admits worker Pods to this port only. */
  agentPort: number;
  /** Where session Pods' agents serve the session's services; the chart's NetworkPolicy admits the gateway to it. */
  servicesPort: number;
  /** Where a session Pod's volumes container serves the volumes' files; the NetworkPolicy admits workers to it. */
  volumesPort: number;
  /** How long stage and harvest wait on the gateway (connecting, or any read or write of a transfer). */
  transferTimeoutS: number;
  /** The share of a sandbox's CPU limit its Pod requests (see sandboxResources). */
  cpuRequestRatio: number;
}

/**
 * What a sandbox Pod requests unless configured: a quarter of its CPU limit. A sandbox spends most of its life idle
 * (a pool Pod waiting for a run, a session's Pod between two), so reserving its whole limit would leave nodes
 * mostly empty; the limit still caps every run as Docker's --cpus does.
 */
export const DEFAULT_CPU_REQUEST_RATIO = 0.25;

/**
 * The resources of the container that runs the code: memory requested as much as it is limited to (a node is never
 * promised memory it does not have, and a Pod is not the first evicted under memory pressure), CPU requested as a
 * share of its limit (at least 1m, the API server's smallest unit) and limited to what the job asks for.
 */
export function sandboxResources(
  limits: { memory_mb: number; cpus: number },
  cpuRequestRatio: number,
): k8s.V1ResourceRequirements {
  const memory = `${limits.memory_mb}Mi`;
  const request = `${Math.max(1, Math.round(limits.cpus * cpuRequestRatio * 1000))}m`;
  return { limits: { memory, cpu: String(limits.cpus) }, requests: { memory, cpu: request } };
}

/**
 * What a Pod's limits were made from, as the worker wrote them: the API server hands quantities back in canonical
 * form ("0.5" as "500m", "1024Mi" as "1Gi"), so the Pod's own fields are no match for the job's numbers.
 */
export const LIMITS_ANNOTATION = 'org.sandgate/limits';
const limitsAnnotation = (l: { memory_mb: number; cpus: number }) => `${l.memory_mb}Mi,${l.cpus}`;

/** The Pod was made with these memory and CPU limits (a Pod's resources cannot be changed here). */
export function madeWithLimits(pod: k8s.V1Pod, limits: { memory_mb: number; cpus: number }): boolean {
  return pod.metadata?.annotations?.[LIMITS_ANNOTATION] === limitsAnnotation(limits);
}

/**
 * The Pod and Secret names of an execution: deterministic, so any worker replica finds them by the execution id
 * alone, and valid DNS-1123 labels (lowercase alphanumerics and '-', at most 63), which `exec_…` is not.
 */
export function podName(executionId: string): string {
  return dnsName('sandgate', executionId);
}

/** A session's long-lived Pod: any worker replica finds it by the session id alone. */
export function sessionPodName(sessionId: string): string {
  return dnsName('sandgate-s', sessionId);
}

function dnsName(prefix: string, id: string): string {
  const readable = id
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40);
  const digest = createHash('sha256').update(id).digest('hex').slice(0, 8);
  return `${prefix}-${readable}-${digest}`.slice(0, 63).replace(/-+$/, '');
}

/**
 * The transfer Secret of one attempt at an execution: named by the attempt too, so a Pod never mounts a Secret an
 * earlier attempt left (the kubelet would mount what it holds when the Pod starts, an old token, and not see it
 * replaced for a minute or more). An earlier attempt's Secret goes with its Pod (ownerReferences).
 */
export const secretName = (executionId: string, attempt: string): string => `${podName(executionId)}-${attempt}`;

const RESTRICTED: k8s.V1SecurityContext = {
  runAsNonRoot: true,
  runAsUser: SANDBOX_UID,
  runAsGroup: SANDBOX_UID,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

/** What every sandbox Pod has: never restarted, no token, no service links, non-root, the runtime's seccomp. */
const POD_BASE = {
  restartPolicy: 'Never',
  automountServiceAccountToken: false,
  enableServiceLinks: false,
  terminationGracePeriodSeconds: 0,
  securityContext: {
    runAsNonRoot: true,
    runAsUser: SANDBOX_UID,
    runAsGroup: SANDBOX_UID,
    fsGroup: SANDBOX_UID,
    seccompProfile: { type: 'RuntimeDefault' },
  },
} satisfies Partial<k8s.V1PodSpec>;

const VOLUMES = {
  workspace: { name: 'workspace', mountPath: WORKDIR },
  tmp: { name: 'tmp', mountPath: '/tmp' },
  run: { name: 'run', mountPath: '/sandgate/run' },
  handoff: { name: 'handoff', mountPath: '/sandgate/handoff' },
  transfer: { name: 'transfer', mountPath: '/sandgate/transfer', readOnly: true },
} satisfies Record<string, k8s.V1VolumeMount>;

const readOnly = (m: k8s.V1VolumeMount): k8s.V1VolumeMount => ({ ...m, readOnly: true });
const mib = (bytes: number) => `${Math.max(1, Math.ceil(bytes / (1 << 20)))}Mi`;
const python = (...args: string[]) => ['python3', '-I', '-S', POD_PROGRAM, ...args];
/** Stage and harvest move files, nothing more: small, fixed resources. */
const HELPER_RESOURCES: k8s.V1ResourceRequirements = {
  limits: { memory: '128Mi', cpu: '500m' },
  requests: { memory: '32Mi', cpu: '50m' },
};

/**
 * The Pod of one execution: stage (init container) fetches the session's files, runner runs the code, harvest sends
 * back what it wrote. Every container is non-root with a read-only root, no capability and no token; the transfer
 * Secret is mounted into stage and harvest only, never into the runner, where the user's code runs.
 */
export function sandboxPod(job: ExecutionJob, s: PodSettings, attempt: string, { stage = true } = {}): k8s.V1Pod {
  const runnerCommand = python('run', String(s.maxOutputBytes), String(job.timeout_ms), '--', ...programFor(job));
  const workspace: k8s.V1EmptyDirVolumeSource = s.workspaceBytes > 0 ? { sizeLimit: mib(s.workspaceBytes) } : {};
  const stdinBytes = job.stdin === null ? 0 : Buffer.byteLength(job.stdin);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: podName(job.execution_id),
      labels: ownershipLabels(job, s.deployment),
      annotations: { [ATTEMPT_ANNOTATION]: attempt },
    },
    spec: {
      ...POD_BASE,
      // Bounds the Pod even when every worker is gone: startup, the run, and harvest.
      activeDeadlineSeconds: Math.ceil((s.startupAllowanceMs + job.timeout_ms + s.harvestGraceMs) / 1000) + 30,
      ...(s.runtimeClassName ? { runtimeClassName: s.runtimeClassName } : {}),
      volumes: [
        { name: 'workspace', emptyDir: workspace },
        { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: mib(s.tmpfsBytes) } },
        { name: 'run', emptyDir: { medium: 'Memory', sizeLimit: mib(stdinBytes + (1 << 20)) } },
        { name: 'handoff', emptyDir: { sizeLimit: '64Mi' } },
        { name: 'transfer', secret: { secretName: secretName(job.execution_id, attempt), defaultMode: 0o440 } },
      ],
      // Nothing to fetch (an empty session, no stdin): no stage, one container less to start.
      ...(stage
        ? {
            initContainers: [
              {
                name: CONTAINERS.stage,
                image: s.helperImage,
                command: python('stage'),
                volumeMounts: [VOLUMES.workspace, VOLUMES.run, VOLUMES.handoff, VOLUMES.transfer],
                resources: HELPER_RESOURCES,
                securityContext: RESTRICTED,
              },
            ],
          }
        : {}),
      containers: [
        {
          name: CONTAINERS.runner,
          // The job's template's image (stage and harvest stay on the helper image).
          image: job.image ?? s.image,
          command: runnerCommand,
          workingDir: WORKDIR,
          // Only the job's variables: nothing of the platform's reaches the user's code.
          env: Object.entries(job.env).map(([name, value]) => ({ name, value })),
          volumeMounts: [VOLUMES.workspace, VOLUMES.tmp, VOLUMES.run],
          resources: sandboxResources(job, s.cpuRequestRatio),
          securityContext: RESTRICTED,
        },
        {
          name: CONTAINERS.harvest,
          image: s.helperImage,
          command: python('harvest', String(job.timeout_ms + s.harvestGraceMs)),
          volumeMounts: [
            readOnly(VOLUMES.workspace),
            readOnly(VOLUMES.run),
            readOnly(VOLUMES.handoff),
            VOLUMES.transfer,
          ],
          resources: HELPER_RESOURCES,
          securityContext: RESTRICTED,
        },
      ],
    },
  };
}

/** The per-execution Secret: the gateway's URL and the transfer token (and stdin), owned by the Pod. */
export function transferSecret(
  job: ExecutionJob,
  pod: k8s.V1Pod,
  settings: Pick<PodSettings, 'deployment' | 'transferTimeoutS'>,
  gatewayUrl: string,
  token: string,
): k8s.V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: secretName(job.execution_id, pod.metadata!.annotations![ATTEMPT_ANNOTATION]!),
      labels: ownershipLabels(job, settings.deployment),
      // Collected with its Pod: the token never outlives the run, even when the worker dies in between.
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name!, uid: pod.metadata!.uid! }],
    },
    type: 'Opaque',
    stringData: {
      url: gatewayUrl,
      token,
      timeout: String(settings.transferTimeoutS),
      ...(job.stdin === null ? {} : { stdin: job.stdin }),
    },
  };
}

/** Where the agent of a session Pod listens unless configured (SANDGATE_K8S_AGENT_PORT; the chart's agentPort). */
export const DEFAULT_AGENT_PORT = 8700;
/** Where a session Pod's agent serves its services to the gateway (SANDGATE_K8S_SERVICES_PORT, chart: servicesPort). */
export const DEFAULT_SERVICES_PORT = 8701;
/** Where a session Pod's volumes container serves the worker (SANDGATE_K8S_VOLUMES_PORT, chart: volumesPort). */
export const DEFAULT_VOLUMES_PORT = 8702;
/** The container of a session Pod that moves its volumes' files (images/runtime/agent/sandgate_volumes.py). */
export const VOLUMES_CONTAINER = 'volumes';
const VOLUMES_PROGRAM = '/usr/lib/sandgate/agent/sandgate_volumes.py';
/** Where the image keeps the agent (images/runtime/agent/sandgate_agent.py). */
export const AGENT_PROGRAM = '/usr/lib/sandgate/agent/sandgate_agent.py';
/**
 * Annotation holding the token a worker presents to a session Pod's agent. The agent gets only its SHA-256, in an
 * environment variable it removes at start; nothing in the Pod can read the annotation (no service account token, no
 * downward API), and every worker replica reads it with the Pod it looks up anyway.
 */
export const AGENT_TOKEN_ANNOTATION = 'org.sandgate/agent-token';
/**
 * Annotation of a session Pod holding the token its agent wants on the services port (sandgate_services.py); the
 * agent gets its SHA-256 as it gets the agent token's. A worker that connects to the Pod hands the token and the Pod's
 * address to the gateway through the data directory (services.ts publishServices).
 */
export const SERVICES_TOKEN_ANNOTATION = 'org.sandgate/services-token';
export const AGENT_CONTAINER = 'agent';

/** What a session Pod needs beyond the job: the settings of every sandbox Pod, and the agent's token. */
export interface SessionPodParams {
  token: string;
  servicesToken: string;
  /** It takes the place of an earlier Pod of the session: its first interpreter is a restart. */
  replaces: boolean;
}

/** A Pod whose agent serves runs over TCP: a session's, or a warm one of the pool. */
interface AgentPod {
  name: string;
  labels: Record<string, string>;
  limits: { memory_mb: number; cpus: number };
  /** `interpreter` for stateful sessions (their interpreter), `always` for process ones, `fresh` in the pool. */
  prewarm: 'interpreter' | 'fresh' | 'always';
  token: string;
  /** Session Pods: the token of the services port, on which the agent then listens. */
  servicesToken?: string;
  /** The agent relays the sandbox's proxy port to connections the worker parks with it (EgressLinks). */
  egress?: boolean;
  /** A template's image; absent: the runtime image (settings). */
  image?: string | undefined;
  /** A session's volumes: an emptyDir each, filled and emptied by the worker through the volumes container. */
  volumes?: readonly JobVolume[];
}

/** The name of a session Pod's emptyDir of its volume number `i`. */
const volumeName = (i: number) => `volume-${i}`;

/** The volume of the job whose emptyDir is named `emptyDir` (as an eviction message names it), if it is one. */
export function volumeOfEmptyDir(job: ExecutionJob, emptyDir: string): JobVolume | undefined {
  const i = /^volume-(\d+)$/.exec(emptyDir)?.[1];
  return i === undefined ? undefined : job.volumes?.[Number(i)];
}

/**
 * A Pod running the agent: it serves runs on `agentPort` (the worker connects to the Pod IP; no exec, no attach), and
 * its workspace is its own emptyDir, filled and emptied by the worker over the same connection. One container,
 * non-root, read-only root, no capability and no token, as every sandbox Pod. No activeDeadlineSeconds: it lives as
 * long as its session or its worker, and any worker's sweep deletes it once that is gone.
 */
function agentPod(p: AgentPod, s: PodSettings): k8s.V1Pod {
  const workspace: k8s.V1EmptyDirVolumeSource = s.workspaceBytes > 0 ? { sizeLimit: mib(s.workspaceBytes) } : {};
  const services = p.servicesToken;
  const volumes = p.volumes ?? [];
  const tokenSha256 = createHash('sha256').update(p.token).digest('hex');
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: p.name,
      labels: p.labels,
      annotations: {
        [AGENT_TOKEN_ANNOTATION]: p.token,
        [LIMITS_ANNOTATION]: limitsAnnotation(p.limits),
        ...(services ? { [SERVICES_TOKEN_ANNOTATION]: services } : {}),
      },
    },
    spec: {
      ...POD_BASE,
      ...(s.runtimeClassName ? { runtimeClassName: s.runtimeClassName } : {}),
      volumes: [
        { name: 'workspace', emptyDir: workspace },
        { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: mib(s.tmpfsBytes) } },
        // A volume's size is its emptyDir's limit: past it the kubelet evicts the Pod, as for the workspace.
        ...volumes.map((v, i) => ({ name: volumeName(i), emptyDir: { sizeLimit: mib(v.size_bytes) } })),
      ],
      containers: [
        {
          name: AGENT_CONTAINER,
          image: p.image ?? s.image,
          command: [
            'python3',
            '-u',
            AGENT_PROGRAM,
            `--prewarm=${p.prewarm}`,
            `--listen=${s.agentPort}`,
            ...(services ? [`--services-port=${s.servicesPort}`] : []),
          ],
          workingDir: WORKDIR,
          env: [
            { name: 'SANDGATE_AGENT_TOKEN_SHA256', value: tokenSha256 },
            ...(services ? [{ name: SERVICES_TOKEN_ENV, value: servicesTokenSha256(services) }] : []),
            ...(p.egress ? [{ name: 'SANDGATE_EGRESS_VIA_AGENT', value: '1' }] : []),
          ],
          ports: [
            { name: 'agent', containerPort: s.agentPort, protocol: 'TCP' },
            ...(services ? [{ name: 'services', containerPort: s.servicesPort, protocol: 'TCP' }] : []),
          ],
          volumeMounts: [
            VOLUMES.workspace,
            VOLUMES.tmp,
            ...volumes.map((v, i) => ({ name: volumeName(i), mountPath: v.path, readOnly: v.read_only })),
          ],
          resources: sandboxResources(p.limits, s.cpuRequestRatio),
          securityContext: RESTRICTED,
        },
        ...(volumes.length > 0 ? [volumesContainer(volumes, s, tokenSha256)] : []),
      ],
    },
  };
}

/**
 * The container that moves a session Pod's volumes' files for the worker. It mounts every volume read-write, where the
 * agent's container mounts a read-only one read-only: that is what keeps a read-only volume so even against the agent,
 * which runs as the same user as the session's code. Same lock-down as every sandbox container.
 */
function volumesContainer(volumes: readonly JobVolume[], s: PodSettings, tokenSha256: string): k8s.V1Container {
  return {
    name: VOLUMES_CONTAINER,
    image: s.helperImage,
    command: [
      'python3',
      '-u',
      '-I',
      '-S',
      VOLUMES_PROGRAM,
      `--listen=${s.volumesPort}`,
      ...volumes.map((v) => `--root=${v.path}`),
    ],
    env: [{ name: 'SANDGATE_AGENT_TOKEN_SHA256', value: tokenSha256 }],
    ports: [{ name: 'volumes', containerPort: s.volumesPort, protocol: 'TCP' }],
    volumeMounts: volumes.map((v, i) => ({ name: volumeName(i), mountPath: v.path })),
    resources: HELPER_RESOURCES,
    securityContext: RESTRICTED,
  };
}

/**
 * A session's long-lived Pod: a stateful session's interpreter lives beside its agent between runs; a process session
 * keeps a python started ahead for its next run.
 */
export function sessionPod(job: ExecutionJob, s: PodSettings, p: SessionPodParams): k8s.V1Pod {
  return agentPod(
    {
      name: sessionPodName(job.session_id),
      labels: sessionLabels(job, s.deployment, p.replaces),
      egress: job.network === 'egress',
      image: job.image,
      limits: job,
      prewarm: job.sandbox === 'stateful' ? 'interpreter' : 'always',
      token: p.token,
      servicesToken: p.servicesToken,
      ...(job.volumes?.length ? { volumes: job.volumes } : {}),
    },
    s,
  );
}

/** A warm Pod of one worker's pool, for one-shots: reset between two runs of the same tenant. */
export function poolPod(
  name: string,
  instanceId: string,
  limits: { memory_mb: number; cpus: number },
  s: PodSettings,
  token: string,
  template?: { name: string; image: string },
): k8s.V1Pod {
  return agentPod(
    {
      name,
      labels: poolLabels(s.deployment, instanceId, template?.name),
      limits,
      prewarm: 'fresh',
      token,
      image: template?.image,
    },
    s,
  );
}
