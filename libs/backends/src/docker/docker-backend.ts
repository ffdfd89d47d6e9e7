import { hasTools, type ToolSettings } from '../run/tool-broker.ts';
import { LocalArtifactStore, type ArtifactStore } from '../artifacts/artifact-store.ts';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import type { ExecutionJob, ExecutionResult, ResumedEvent, SavedVariables } from '@sandgate/contracts';
import { SessionCopies, type Workspaces } from '@sandgate/storage';
import { poolFigures } from '../pool/sandbox-pool.ts';
import type { BackendHealth, BackendStats, EventSink, ExecutionBackend, LiveSet, SessionRef } from '../backend.ts';
import { checkpointInHost, pauseInHost, resumeInHost, type SessionStateSettings } from '../run/session-state.ts';
import { CAPABILITIES, type BackendCapabilities } from '../capabilities.ts';
import { DEFAULT_DEPLOYMENT, LABELS } from '../housekeeping/labels.ts';
import { silentLogger, type BackendLogger } from '../logger.ts';
import { DEFAULT_MAX_OUTPUT_BYTES } from '../outcome/output.ts';
import { beginRun, InFlight } from '../run/lifecycle.ts';
import { runCold } from './cold-run.ts';
import type { SandboxLimits, SandboxSettings } from './container-spec.ts';
import { engineError, engineProblem, imageMissing, isNotFound } from './engine-errors.ts';
import { probeHealth } from '../housekeeping/health.ts';
import { parseUser, SlotDirs } from './pool-dirs.ts';
import { runPooledContainer } from './pooled-run.ts';
import { runInSession } from '../run/session-run.ts';
import { SessionSandboxes, type SessionSandbox } from './session-sandboxes.ts';
import { EgressProxy, type EgressSettings } from '../network/egress-proxy.ts';
import { EgressSockets } from './egress-sockets.ts';
import { sweepContainers } from './sweep.ts';
import { retainServices } from '../services.ts';
import { WarmPool, type PoolStats } from './warm-pool.ts';
import { TemplatePools, type TemplatePoolSpec } from '../pool/template-pools.ts';
import type { PooledSandbox } from './warm-pool.ts';
import type { TemplateBuildSettings } from '../templates/template-image.ts';
import {
  buildTemplateImage,
  pruneTemplateImages,
  type TemplateBuildOutcome,
  type TemplateBuildRequest,
} from './template-build.ts';

export interface DockerBackendOptions {
  /** The engine's Unix socket, for the default client. Default: DOCKER_HOST, else the local socket. */
  socketPath?: string;
  /** Engine client. Default: `new Dockerode()` on `socketPath`. */
  docker?: Dockerode;
  /** Runtime image. Default 'sandgate/runtime:1'. */
  image?: string;
  /** OCI runtime; 'runsc' runs sandboxes under gVisor. Default: the engine's default (runc). */
  runtime?: 'runc' | 'runsc';
  /** Session directories on the Docker host; a session's is bind-mounted read-write at /mnt/data. */
  workspaces: Workspaces;
  /** uid:gid the code runs as. Default '1000:1000' (the image's `sandbox` user). */
  user?: string;
  /** Processes and threads per sandbox. Default 128. */
  pidsLimit?: number;
  /** Size of the writable /tmp. Default 64 MiB. */
  tmpfsBytes?: number;
  /** Bytes of stdout and of stderr kept per execution; the rest is dropped and flagged. Default 100_000. */
  maxOutputBytes?: number;
  /** Open files per sandbox. Default 1024. */
  nofile?: number;
  /** The download URL of an artifact. */
  artifactUrl: (sessionId: string, path: string) => string;
  /** The tools runs' code may call (sandgate.tools), by tenant; none: no run gets a tool channel. */
  tools?: ToolSettings;
  /** pino-like logger. Default: silent. */
  logger?: BackendLogger;
  /**
   * Names this sandgate installation on the engine (label org.sandgate.deployment on every container). Sweep only
   * ever touches containers of its own deployment, so two deployments or test stacks can share one engine.
   * Default 'sandgate'.
   */
  deployment?: string;
  /** This worker's id (label org.sandgate.instance on its warm-pool containers). Default: a random id. */
  instanceId?: string;
  /** Warm sandboxes kept ready for one-shot runs; 0 disables the pool. Default 2. */
  poolSize?: number;
  /**
   * One-shot runs a pool sandbox may serve, for one tenant, with a reset between two (every process killed, the
   * scratch mounts emptied, the session's files moved out); 1 makes every pool sandbox single-use. Default 100.
   */
  poolMaxRuns?: number;
  /** How long a pool sandbox's reset may take before the sandbox is given up (killed and removed). Default 5000 ms. */
  poolResetTimeoutMs?: number;
  /** Runs this backend takes at once (the worker's concurrency): as many reset sandboxes are kept. Default 2. */
  concurrency?: number;
  /**
   * Memory and CPUs warm sandboxes are made with: pass the deployment's default limits. A run that asks for
   * others still takes a warm sandbox, resized with `docker update` first. Default 512 MB, 1 CPU.
   */
  poolLimits?: SandboxLimits;
  /** How long an interrupted session run may take to stop before its sandbox is killed. Default 2000 ms. */
  interruptGraceMs?: number;
  /** Sweep keeps containers younger than this: the live set it is given may predate them. Default 5000 ms. */
  sweepGraceMs?: number;
  /**
   * Network egress of session sandboxes through the egress proxy, for the tenants it allows (SANDGATE_EGRESS);
   * absent: no sandbox has any network.
   */
  egress?: EgressSettings;
  /** SANDGATE_MAX_STATE_BYTES: the most a stateful session's saved variables may take. Default 1 GiB. */
  maxStateBytes?: number;
  /** SANDGATE_STATE_SAVE_TIMEOUT_S: how long saving them may take at a pause, fork or snapshot. Default 60 s. */
  stateSaveTimeoutMs?: number;
  /** SANDGATE_UNDO_DEPTH: undo steps kept per session (on a btrfs data directory). Default 5. */
  undoDepth?: number;
  /** Where template builds get packages (SANDGATE_TEMPLATE_*). Default: PyPI and npm's registry, no wheels, no CA. */
  templateBuilds?: TemplateBuildSettings & { wheelsMaxBytes: number };
}

/** How long a new sandbox's agent may take to say `ready` (python start-up on a busy host). */
const READY_TIMEOUT_MS = 30_000;
/** A reset pool sandbox waits this long for its tenant's next one-shot: long enough for a burst, not for a day. */
const RECYCLED_IDLE_MS = 60_000;

/**
 * Runs executions on one Docker engine: one-shots in a warm-pool sandbox when one is ready and in a fresh container
 * otherwise; session runs in the session's long-lived sandbox, as a new process or in its live interpreter.
 */
export class DockerBackend implements ExecutionBackend {
  readonly name = 'docker';
  readonly capabilities: BackendCapabilities = CAPABILITIES.docker;
  readonly #docker: Dockerode;
  readonly #settings: SandboxSettings;
  readonly #workspaces: Workspaces;
  readonly #maxOutputBytes: number;
  readonly #artifacts: ArtifactStore;
  readonly #tools: ToolSettings | undefined;
  readonly #log: BackendLogger;
  readonly #instanceId: string;
  readonly #sweepGraceMs: number;
  readonly #interruptGraceMs: number;
  readonly #resetTimeoutMs: number;
  readonly #slots: SlotDirs;
  readonly #pool: WarmPool;
  readonly #templatePools: TemplatePools<PooledSandbox, WarmPool>;
  readonly #templateBuilds: TemplateBuildSettings & { wheelsMaxBytes: number };
  readonly #sessions: SessionSandboxes;
  readonly #egress: EgressSockets | undefined;
  readonly #inFlight = new InFlight();
  readonly #activeSessions = new Set<string>();
  readonly #state: SessionStateSettings;
  #engineId: string | undefined;

  constructor({
    socketPath,
    docker = new Dockerode(socketPath === undefined ? undefined : { socketPath }),
    image = 'sandgate/runtime:1',
    runtime,
    workspaces,
    user = '1000:1000',
    pidsLimit = 128,
    tmpfsBytes = 64 * 1024 * 1024,
    maxOutputBytes = DEFAULT_MAX_OUTPUT_BYTES,
    nofile = 1024,
    artifactUrl,
    tools,
    logger = silentLogger,
    deployment = DEFAULT_DEPLOYMENT,
    instanceId = `docker-${randomBytes(6).toString('hex')}`,
    poolSize = 2,
    poolMaxRuns = 100,
    poolResetTimeoutMs = 5000,
    concurrency = 2,
    poolLimits = { memory_mb: 512, cpus: 1 },
    interruptGraceMs = 2000,
    sweepGraceMs = 5000,
    egress,
    maxStateBytes = 1 << 30,
    stateSaveTimeoutMs = 60_000,
    undoDepth = 5,
    templateBuilds = {
      pipIndexUrl: 'https://pypi.org/simple',
      npmRegistry: 'https://registry.npmjs.org/',
      wheelsDir: null,
      caFile: null,
      wheelsMaxBytes: 2 << 30,
    },
  }: DockerBackendOptions) {
    this.#docker = docker;
    this.#settings = { image, runtime, user, pidsLimit, tmpfsBytes, nofile, deployment };
    this.#workspaces = workspaces;
    this.#maxOutputBytes = maxOutputBytes;
    this.#artifacts = new LocalArtifactStore(artifactUrl);
    this.#tools = tools;
    this.#log = logger;
    this.#instanceId = instanceId;
    this.#sweepGraceMs = sweepGraceMs;
    this.#interruptGraceMs = interruptGraceMs;
    this.#resetTimeoutMs = poolResetTimeoutMs;
    const copies = new SessionCopies(workspaces);
    this.#state = { copies, maxStateBytes, saveTimeoutMs: stateSaveTimeoutMs, undoDepth };
    // Beside the sessions, on their filesystem, so that a rename can hand a slot directory to a session.
    this.#slots = new SlotDirs(workspaces.dataDir, parseUser(user), workspaces.quota);
    // Beside the sessions too: the directory holding each session's proxy socket is bind-mounted like theirs.
    this.#egress = egress && new EgressSockets(join(workspaces.dataDir, 'egress'), new EgressProxy(egress, logger));
    this.#sessions = new SessionSandboxes(
      docker,
      this.#settings,
      logger,
      READY_TIMEOUT_MS,
      workspaces.dataDir,
      this.#egress,
    );
    const pool = (o: { size: number; limits: SandboxLimits; image?: string; template?: string }) =>
      new WarmPool({
        docker,
        settings: o.image === undefined ? this.#settings : { ...this.#settings, image: o.image },
        slots: this.#slots,
        instanceId,
        size: o.size,
        limits: o.limits,
        log: logger,
        readyTimeoutMs: READY_TIMEOUT_MS,
        // gVisor lists no System V IPC objects (/proc/sysvipc), so a reset there could not prove them gone.
        maxRuns: runtime === 'runsc' ? 1 : poolMaxRuns,
        maxRecycled: Math.max(o.size, concurrency),
        recycledIdleMs: RECYCLED_IDLE_MS,
        ...(o.template === undefined ? {} : { template: o.template }),
      });
    this.#pool = pool({ size: poolSize, limits: poolLimits });
    this.#templatePools = new TemplatePools((spec: TemplatePoolSpec) => pool(spec), logger);
    this.#templateBuilds = templateBuilds;
  }

  execute(job: ExecutionJob, events: EventSink, signal: AbortSignal, log?: BackendLogger): Promise<ExecutionResult> {
    return this.#inFlight.around(job.execution_id, () => this.#execute(job, events, signal, log ?? this.#log));
  }

  async #execute(
    job: ExecutionJob,
    events: EventSink,
    signal: AbortSignal,
    log: BackendLogger,
  ): Promise<ExecutionResult> {
    const begun = await beginRun(this.#workspaces, job, events, signal);
    if (begun.result) return begun.result;
    const { dir } = begun;
    const common = {
      maxOutputBytes: this.#maxOutputBytes,
      quota: this.#workspaces.quota,
      artifacts: this.#artifacts,
      log,
      ...(this.#tools ? { tools: this.#tools } : {}),
    };
    if (job.sandbox === 'session' || job.sandbox === 'stateful') {
      this.#activeSessions.add(job.session_id);
      try {
        return await runInSession<SessionSandbox>(
          {
            ...common,
            sessions: this.#sessions,
            volumes: this.#workspaces.volumes,
            interruptGraceMs: this.#interruptGraceMs,
            state: this.#state,
          },
          job,
          dir,
          events,
          signal,
        );
      } finally {
        this.#activeSessions.delete(job.session_id);
      }
    }
    // A template's one-shot takes from its template's pool; the runtime image's, from the deployment's.
    const settings = this.#settingsOf(job);
    const pool =
      job.image === undefined
        ? this.#pool
        : this.#templatePools.for(job.image, job.template ?? job.image, { memory_mb: job.memory_mb, cpus: job.cpus });
    // A run whose tenant has tools needs an agent (the tool channel): a sandbox is made for it when none is ready.
    const needsAgent = hasTools(this.#tools, job.tenant);
    const warm =
      pool?.take(job.tenant) ??
      (needsAgent && pool !== undefined
        ? await pool.makeFresh().catch((err: unknown) => {
            throw engineError(err, settings.image);
          })
        : undefined);
    if (warm !== undefined && pool !== undefined) {
      const result = await runPooledContainer(
        { ...common, pool, slots: this.#slots, resetTimeoutMs: this.#resetTimeoutMs },
        warm,
        job,
        dir,
        events,
        signal,
      );
      if (result !== undefined) return result;
    }
    return runCold({ ...common, docker: this.#docker, settings }, job, dir, events, signal);
  }

  /** The settings of a job's sandbox: its template's image, or the runtime image. */
  #settingsOf(job: ExecutionJob): SandboxSettings {
    return job.image === undefined ? this.#settings : { ...this.#settings, image: job.image };
  }

  setTemplatePools(pools: TemplatePoolSpec[]): void {
    this.#templatePools.set(pools);
  }

  buildTemplate(
    req: TemplateBuildRequest,
    log: (text: string) => void,
    signal: AbortSignal,
  ): Promise<TemplateBuildOutcome> {
    const { wheelsMaxBytes, ...settings } = this.#templateBuilds;
    const scope = { docker: this.#docker, deployment: this.#settings.deployment, settings, wheelsMaxBytes };
    return buildTemplateImage(scope, req, log, signal);
  }

  pruneTemplateImages(keep: ReadonlySet<string>): Promise<string[]> {
    return pruneTemplateImages(this.#docker, this.#settings.deployment, keep);
  }

  pauseSession(session: SessionRef, { discard }: { discard: boolean }): Promise<SavedVariables | null> {
    return pauseInHost<SessionSandbox>(this.#sessions, this.#state, session, discard).catch((err: unknown) => {
      throw this.#sessions.failure(err);
    });
  }

  checkpointSession(session: SessionRef, file: string): Promise<SavedVariables | null> {
    return checkpointInHost<SessionSandbox>(this.#sessions, this.#state, session.sessionId, file);
  }

  async resumeSession(job: ExecutionJob): Promise<ResumedEvent['variables']> {
    const dir = await this.#workspaces.create(job.session_id);
    return resumeInHost<SessionSandbox>(this.#sessions, this.#state, job, dir, this.#log);
  }

  /**
   * Removes every container of this deployment that nothing in `live` owns, nor anything running here: executions,
   * sessions, and this worker's own warm pool. Answers with the execution, session or worker each belonged to.
   */
  async sweep(live: LiveSet): Promise<{ removed: string[] }> {
    const keep: LiveSet = {
      executions: this.#inFlight.with(live.executions),
      sessions: new Set([...live.sessions, ...this.#activeSessions]),
      workers: new Set([...live.workers, this.#instanceId]),
    };
    const scope = {
      docker: this.#docker,
      deployment: this.#settings.deployment,
      graceMs: this.#sweepGraceMs,
      slots: this.#slots,
      log: this.#log,
    };
    const removed = await sweepContainers(scope, keep).catch((err: unknown) => {
      throw engineError(err, this.#settings.image);
    });
    this.#sessions.forget(keep.sessions);
    this.#egress?.proxy.retain(keep.sessions);
    await retainServices(this.#workspaces.dataDir, keep.sessions, live.readAt);
    if (removed.length > 0) this.#log.info({ removed }, 'swept orphaned sandboxes');
    return { removed };
  }

  /** The engine answers a ping: the cheapest call it has (no image check: check() did that at start-up). */
  health(timeoutMs: number): Promise<BackendHealth> {
    // dockerode's types give ping() no options; it takes { abortSignal } like its other calls.
    const ping = this.#docker.ping.bind(this.#docker) as (opts: { abortSignal: AbortSignal }) => Promise<unknown>;
    return probeHealth({ what: 'engine', timeoutMs, call: (abortSignal) => ping({ abortSignal }), why: engineProblem });
  }

  async check(): Promise<void> {
    const { image } = this.#settings;
    await this.#docker.ping().catch((err: unknown) => {
      throw engineError(err, image);
    });
    await this.#docker
      .getImage(image)
      .inspect()
      .catch((err: unknown) => {
        throw isNotFound(err) ? imageMissing(image, err) : engineError(err, image);
      });
  }

  async stats(): Promise<BackendStats> {
    const pool = this.#pool.stats();
    const templatePools = this.#templatePools.figures();
    this.#engineId ??= ((await this.#docker.info()) as { ID: string }).ID;
    const sessions = await this.#docker.listContainers({
      filters: {
        label: [`${LABELS.deployment}=${this.#settings.deployment}`, `${LABELS.kind}=session`],
        status: ['running'],
      },
    });
    return {
      pool: poolFigures(pool),
      ...(templatePools.length > 0 ? { templatePools } : {}),
      sessionSandboxes: sessions.length,
      engine: this.#engineId,
    };
  }

  /** Hits, misses and fill of the warm pool. */
  poolStats(): PoolStats {
    return this.#pool.stats();
  }

  /** Resolves once the warm pools are full (at once when disabled or closed). For benchmarks and tests. */
  async poolReady(): Promise<void> {
    await Promise.all([this.#pool.whenReady(), this.#templatePools.whenReady()]);
  }

  /** Stops refilling the pool, removes this instance's warm sandboxes, detaches from session sandboxes (they stay). */
  async close(): Promise<void> {
    this.#sessions.close();
    this.#egress?.shutdown();
    await this.#egress?.proxy.shutdown();
    await this.#tools?.caller.close();
    await Promise.all([this.#pool.close(), this.#templatePools.close()]);
  }
}
