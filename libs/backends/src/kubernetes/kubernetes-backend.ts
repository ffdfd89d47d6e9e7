import { hasTools, type ToolSettings } from '../run/tool-broker.ts';
import { LocalArtifactStore, type ArtifactStore } from '../artifacts/artifact-store.ts';
import { retainServices } from '../services.ts';
import { EgressProxy, type EgressSettings } from '../network/egress-proxy.ts';
import { EgressLinks } from './egress-links.ts';
import * as k8s from '@kubernetes/client-node';
import {
  SandgateError,
  type ExecutionJob,
  type ExecutionResult,
  type ResumedEvent,
  type SavedVariables,
} from '@sandgate/contracts';
import { SessionCopies, type Workspaces } from '@sandgate/storage';
import { poolFigures } from '../pool/sandbox-pool.ts';
import type { BackendHealth, BackendStats, EventSink, ExecutionBackend, LiveSet, SessionRef } from '../backend.ts';
import { checkpointInHost, pauseInHost, resumeInHost, type SessionStateSettings } from '../run/session-state.ts';
import { CAPABILITIES, type BackendCapabilities } from '../capabilities.ts';
import { DEFAULT_DEPLOYMENT, LABELS } from '../housekeeping/labels.ts';
import { beginRun, InFlight } from '../run/lifecycle.ts';
import { silentLogger, type BackendLogger } from '../logger.ts';
import { DEFAULT_MAX_OUTPUT_BYTES } from '../outcome/output.ts';
import { apiProblem, clusterError, messageOf, PodApi } from './api.ts';
import { probeHealth } from '../housekeeping/health.ts';
import { runInPod, type GrantTransfer, type PodTiming } from './pod-run.ts';
import {
  DEFAULT_AGENT_PORT,
  DEFAULT_CPU_REQUEST_RATIO,
  DEFAULT_SERVICES_PORT,
  DEFAULT_VOLUMES_PORT,
  type PodSettings,
} from './pod-spec.ts';
import { sweepPods } from './sweep.ts';
import { PodWatch } from './pod-watch.ts';
import { runInSession } from '../run/session-run.ts';
import { SessionPods, type SessionPod } from './session-pods.ts';
import { AgentPods, type AgentPodTiming } from './agent-pods.ts';
import { PodPool, runPooledPod, type PooledPod } from './pod-pool.ts';
import { TemplatePools, type TemplatePoolSpec } from '../pool/template-pools.ts';
import { randomBytes } from 'node:crypto';

export interface KubernetesBackendOptions {
  /** How to reach the API server: a kubeconfig (the in-cluster service account, $KUBECONFIG or a file). */
  kubeConfig: k8s.KubeConfig;
  /** The namespace sandbox Pods are made in; the worker's Role grants its verbs there only. */
  namespace: string;
  /** The gateway's URL as sandbox Pods reach it: stage and harvest move the session's files through it. */
  gatewayUrl: string;
  /** Grants one execution's Pod access to its session's files. */
  grantTransfer: GrantTransfer;
  workspaces: Workspaces;
  artifactUrl: (sessionId: string, path: string) => string;
  image?: string;
  helperImage?: string;
  runtimeClassName?: string;
  deployment?: string;
  maxOutputBytes?: number;
  /** The workspace emptyDir's sizeLimit: the session disk quota. Default: the workspaces' own quota, or none. */
  workspaceBytes?: number;
  tmpfsBytes?: number;
  logger?: BackendLogger;
  /** Sweep keeps Pods younger than this: the live set it is given may predate them. Default 5 s, as on Docker. */
  sweepGraceMs?: number;
  timing?: Partial<PodTiming>;
  sessionTiming?: Partial<AgentPodTiming>;
  /** The tools runs' code may call (sandgate.tools), by tenant; none: no run gets a tool channel. */
  tools?: ToolSettings;
  /**
   * Network egress of session Pods through this worker's egress proxy, for the tenants it allows (SANDGATE_EGRESS);
   * absent: no session Pod has network (docs/network.md).
   */
  egress?: EgressSettings;
  /** This worker's id (label org.sandgate.instance on its pool Pods). Default: a random id. */
  instanceId?: string;
  /** Warm Pods kept ready for one-shots; 0 disables the pool (every one-shot gets a Pod of its own). Default 2. */
  poolSize?: number;
  /** One-shots a pool Pod may serve, for one tenant, with a reset between two. Default 100. */
  poolMaxRuns?: number;
  /** How long a pool Pod's reset may take before the Pod is given up. Default 5000 ms. */
  poolResetTimeoutMs?: number;
  /** Memory and CPUs of pool Pods: a one-shot asking for others gets a Pod of its own. Default 512 MB, 1 CPU. */
  poolLimits?: { memory_mb: number; cpus: number };
  /** Runs this worker takes at once: how many reset Pods are worth keeping for their tenants. Default 4. */
  concurrency?: number;
  /** The port session Pods' agents listen on. Default 8700 (the chart's sandbox.agentPort). */
  agentPort?: number;
  /** The port session Pods' agents serve services on, to the gateway. Default 8701 (the chart's servicesPort). */
  servicesPort?: number;
  /** The port session Pods' volumes containers serve the worker on. Default 8702 (the chart's volumesPort). */
  volumesPort?: number;
  /** How long an interrupted session run may take to end before its Pod is deleted; 0 deletes at once. */
  interruptGraceMs?: number;
  /** How long stage and harvest wait on the gateway: connecting, or any read or write. Default 60 s. */
  transferTimeoutS?: number;
  /**
   * The share of a sandbox's CPU limit its Pod requests: what the scheduler reserves for it on a node, while the
   * limit is what its cgroup enforces. Default 0.25 (docs/kubernetes.md, "CPU requests"); 1: requests equal limits.
   */
  cpuRequestRatio?: number;
  /** Called by close(): what the caller made for this backend (e.g. the Redis connection of grantTransfer) goes. */
  onClose?: () => Promise<void>;
  /** SANDGATE_MAX_STATE_BYTES: the most a stateful session's saved variables may take. Default 1 GiB. */
  maxStateBytes?: number;
  /** SANDGATE_STATE_SAVE_TIMEOUT_S: how long saving them may take at a pause, fork or snapshot. Default 60 s. */
  stateSaveTimeoutMs?: number;
  /** SANDGATE_UNDO_DEPTH: undo steps kept per session (on a btrfs data directory). Default 5. */
  undoDepth?: number;
}

const DEFAULT_TIMING: PodTiming = {
  pollMinMs: 50,
  pollMaxMs: 500,
  pollGrowth: 1.25,
  outputEveryMs: 500,
  resyncMs: 10_000,
  startupMs: 180_000,
  deadRunnerGraceMs: 10_000,
  resultLagMs: 5_000,
};

/**
 * A health probe answers from the calls runs made when one of them got an answer this recently (and none failed since):
 * a busy worker probes no more, an idle one every this often.
 */
const HEALTH_FRESH_MS = 10_000;

/**
 * Runs executions as Kubernetes Pods with plain REST calls and one watch of the deployment's Pods (no exec, attach,
 * port-forward or follow). A one-shot
 * gets a Pod of its own, whose files move through the gateway (stage and harvest containers). A session, process or
 * stateful, gets a long-lived Pod whose agent the worker reaches over TCP at the Pod IP, moving the session's files
 * over that connection. Never a path shared with the node.
 */
export class KubernetesBackend implements ExecutionBackend {
  readonly name = 'kubernetes';
  readonly capabilities: BackendCapabilities = CAPABILITIES.kubernetes;
  readonly api: PodApi;
  /** The deployment's Pods as this worker sees them: its runs follow their Pods, and its sweep looks, through it. */
  readonly watch: PodWatch;
  readonly #workspaces: Workspaces;
  readonly #settings: PodSettings;
  readonly #options: KubernetesBackendOptions;
  readonly #log: BackendLogger;
  readonly #timing: PodTiming;
  readonly #inFlight = new InFlight();
  readonly #sweepGraceMs: number;
  readonly #sessions: SessionPods;
  readonly #activeSessions = new Set<string>();
  readonly #interruptGraceMs: number;
  readonly #pods: AgentPods;
  readonly #pool: PodPool;
  readonly #templatePools: TemplatePools<PooledPod, PodPool>;
  readonly #maxFileBytes: number;
  readonly #poolResetTimeoutMs: number;
  readonly #artifacts: ArtifactStore;
  readonly #egress: EgressLinks | undefined;
  readonly #state: SessionStateSettings;

  constructor(options: KubernetesBackendOptions) {
    const image = options.image ?? 'sandgate/runtime:1';
    this.#options = options;
    this.#log = options.logger ?? silentLogger;
    this.api = new PodApi(options.kubeConfig, options.namespace, this.#log);
    const deployment = options.deployment ?? DEFAULT_DEPLOYMENT;
    this.watch = new PodWatch(this.api, `${LABELS.managed}=true,${LABELS.deployment}=${deployment}`, this.#log);
    this.#workspaces = options.workspaces;
    this.#timing = { ...DEFAULT_TIMING, ...options.timing };
    this.#sweepGraceMs = options.sweepGraceMs ?? 5_000;
    this.#settings = {
      image,
      helperImage: options.helperImage ?? image,
      runtimeClassName: options.runtimeClassName,
      deployment,
      workspaceBytes: options.workspaceBytes ?? options.workspaces.quota?.bytes ?? 0,
      tmpfsBytes: options.tmpfsBytes ?? 64 << 20,
      maxOutputBytes: options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES,
      harvestGraceMs: 30_000,
      startupAllowanceMs: this.#timing.startupMs,
      agentPort: options.agentPort ?? DEFAULT_AGENT_PORT,
      servicesPort: options.servicesPort ?? DEFAULT_SERVICES_PORT,
      volumesPort: options.volumesPort ?? DEFAULT_VOLUMES_PORT,
      transferTimeoutS: options.transferTimeoutS ?? 60,
      cpuRequestRatio: options.cpuRequestRatio ?? DEFAULT_CPU_REQUEST_RATIO,
    };
    this.#interruptGraceMs = options.interruptGraceMs ?? 2000;
    this.#state = {
      copies: new SessionCopies(options.workspaces),
      maxStateBytes: options.maxStateBytes ?? 1 << 30,
      saveTimeoutMs: options.stateSaveTimeoutMs ?? 60_000,
      undoDepth: options.undoDepth ?? 5,
    };
    this.#artifacts = new LocalArtifactStore(options.artifactUrl);
    const bytes = this.#settings.workspaceBytes;
    this.#maxFileBytes = bytes > 0 ? bytes : Number.MAX_SAFE_INTEGER;
    this.#pods = new AgentPods(
      this.api,
      this.#settings,
      { startupMs: this.#timing.startupMs, pollMs: 100, handshakeMs: 10_000, ...options.sessionTiming },
      this.#log,
    );
    this.#egress = options.egress && new EgressLinks(new EgressProxy(options.egress, this.#log), this.#log);
    this.#sessions = new SessionPods(
      this.#pods,
      this.#maxFileBytes,
      options.workspaces.dataDir,
      options.workspaces.volumes,
      this.#egress,
    );
    this.#poolResetTimeoutMs = options.poolResetTimeoutMs ?? 5000;
    const instanceId = options.instanceId ?? `k8s-${randomBytes(6).toString('hex')}`;
    const pool = (o: { size: number; limits: { memory_mb: number; cpus: number }; template?: TemplatePoolSpec }) =>
      new PodPool({
        pods: this.#pods,
        instanceId,
        size: o.size,
        limits: o.limits,
        maxRuns: options.runtimeClassName ? 1 : (options.poolMaxRuns ?? 100),
        maxRecycled: Math.max(o.size, options.concurrency ?? 4),
        recycledIdleMs: 60_000,
        ...(o.template ? { template: { name: o.template.template, image: o.template.image } } : {}),
      });
    this.#pool = pool({ size: options.poolSize ?? 2, limits: options.poolLimits ?? { memory_mb: 512, cpus: 1 } });
    this.#templatePools = new TemplatePools(
      (spec: TemplatePoolSpec) => pool({ size: spec.size, limits: spec.limits, template: spec }),
      this.#log,
    );
  }

  setTemplatePools(pools: TemplatePoolSpec[]): void {
    this.#templatePools.set(pools);
  }

  execute(job: ExecutionJob, events: EventSink, signal: AbortSignal, log?: BackendLogger): Promise<ExecutionResult> {
    return this.#inFlight.around(job.execution_id, async () => {
      if (!this.capabilities.sandboxes.includes(job.sandbox)) {
        throw new SandgateError('unsupported_by_backend', `the kubernetes backend cannot run ${job.sandbox} sandboxes`);
      }
      const begun = await beginRun(this.#workspaces, job, events, signal);
      if (begun.result) return begun.result;
      if (job.sandbox !== 'oneshot') {
        this.#activeSessions.add(job.session_id);
        try {
          return await runInSession<SessionPod>(
            {
              sessions: this.#sessions,
              maxOutputBytes: this.#settings.maxOutputBytes,
              quota: this.#workspaces.quota,
              interruptGraceMs: this.#interruptGraceMs,
              artifacts: this.#artifacts,
              log: log ?? this.#log,
              state: this.#state,
              ...(this.#options.tools ? { tools: this.#options.tools } : {}),
            },
            job,
            begun.dir,
            events,
            signal,
          );
        } finally {
          this.#activeSessions.delete(job.session_id);
        }
      }
      // A template's one-shot takes from its template's pool; the runtime image's, from the deployment's.
      const limits = { memory_mb: job.memory_mb, cpus: job.cpus };
      const pool =
        job.image === undefined ? this.#pool : this.#templatePools.for(job.image, job.template ?? job.image, limits);
      // A run whose tenant has tools needs an agent (the tool channel): a Pod is made for it when none is ready.
      const taken = pool?.fits(job) ? pool.take(job.tenant) : undefined;
      const warm =
        taken ?? (pool && hasTools(this.#options.tools, job.tenant) ? await pool.makeFresh(limits) : undefined);
      if (warm !== undefined && pool !== undefined) {
        const result = await runPooledPod(
          {
            pool,
            pods: this.#pods,
            resetTimeoutMs: this.#poolResetTimeoutMs,
            maxOutputBytes: this.#settings.maxOutputBytes,
            maxFileBytes: this.#maxFileBytes,
            quota: this.#workspaces.quota,
            artifacts: this.#artifacts,
            log: log ?? this.#log,
            ...(this.#options.tools ? { tools: this.#options.tools } : {}),
          },
          warm,
          job,
          begun.dir,
          events,
          signal,
        );
        if (result !== undefined) return result;
      }
      return runInPod(
        {
          api: this.api,
          watch: this.watch.start(),
          settings: this.#settings,
          gatewayUrl: this.#options.gatewayUrl,
          grantTransfer: this.#options.grantTransfer,
          maxOutputBytes: this.#settings.maxOutputBytes,
          quota: this.#workspaces.quota,
          artifacts: this.#artifacts,
          log: log ?? this.#log,
          timing: this.#timing,
        },
        job,
        begun.dir,
        events,
        signal,
      );
    });
  }

  async pauseSession(session: SessionRef, { discard }: { discard: boolean }): Promise<SavedVariables | null> {
    // What a terminal or a service wrote since the last run is the session's: kept before the Pod goes.
    await this.#sessions
      .bringBack(session.sessionId, this.#workspaces.dir(session.sessionId))
      .catch((err: unknown) =>
        this.#log.warn({ sessionId: session.sessionId, err: messageOf(err) }, "could not bring back the Pod's files"),
      );
    return pauseInHost<SessionPod>(this.#sessions, this.#state, session, discard).catch((err: unknown) => {
      throw this.#sessions.failure(err);
    });
  }

  checkpointSession(session: SessionRef, file: string): Promise<SavedVariables | null> {
    return checkpointInHost<SessionPod>(this.#sessions, this.#state, session.sessionId, file);
  }

  async resumeSession(job: ExecutionJob): Promise<ResumedEvent['variables']> {
    const dir = await this.#workspaces.create(job.session_id);
    return resumeInHost<SessionPod>(this.#sessions, this.#state, job, dir, this.#log);
  }

  async sweep(live: LiveSet): Promise<{ removed: string[] }> {
    const sessions = new Set([...live.sessions, ...this.#activeSessions]);
    const keep = { ...live, sessions, executions: this.#inFlight.with(live.executions) };
    this.#sessions.forget(sessions);
    const removed = await sweepPods(
      this.api,
      this.#settings.deployment,
      keep,
      this.#sweepGraceMs,
      this.#log,
      this.watch.start().synced ? this.watch.list() : undefined,
    );
    await retainServices(this.#workspaces.dataDir, sessions, live.readAt);
    await this.#sessions.synced.retain(sessions, live.readAt);
    this.#egress?.retain(sessions);
    this.#egress?.proxy.retain(sessions);
    if (removed.length > 0) this.#log.info({ removed }, 'swept orphaned sandbox Pods');
    return { removed };
  }

  /**
   * The API server answers a list of at most one of this deployment's Pods, with the credentials runs use; or it
   * answered a call of this worker's within HEALTH_FRESH_MS and none failed since, which tells as much.
   */
  async health(timeoutMs: number): Promise<BackendHealth> {
    if (this.api.answeredWithin(HEALTH_FRESH_MS)) return { usable: true };
    const selector = `${LABELS.deployment}=${this.#settings.deployment}`;
    return probeHealth({
      what: 'API server',
      timeoutMs,
      call: (signal) => this.api.probe(selector, signal),
      why: apiProblem,
    });
  }

  /** The API server answers and the namespace is ours to list Pods in. */
  async check(): Promise<void> {
    await this.api.listPods(`${LABELS.deployment}=${this.#settings.deployment}`).catch((err: unknown) => {
      throw clusterError(err, `listing Pods in namespace ${this.api.namespace}`);
    });
  }

  async stats(): Promise<BackendStats> {
    const pool = this.#pool.stats();
    const templatePools = this.#templatePools.figures();
    return {
      pool: poolFigures(pool),
      ...(templatePools.length > 0 ? { templatePools } : {}),
      sessionSandboxes: this.#sessions.connected,
      engine: `kubernetes:${this.#options.kubeConfig.getCurrentCluster()?.server ?? 'in-cluster'}/${this.api.namespace}`,
    };
  }

  /** Resolves once the warm pools are full (at once without one). */
  async poolReady(): Promise<void> {
    await Promise.all([this.#pool.whenReady(), this.#templatePools.whenReady()]);
  }

  async close(): Promise<void> {
    this.#sessions.close();
    this.#egress?.close();
    await this.#egress?.proxy.shutdown();
    await this.#options.tools?.caller.close();
    await Promise.all([this.#pool.close(), this.#templatePools.close()]);
    await this.watch.close();
    this.api.close();
    await this.#options.onClose?.();
  }
}
