import Dockerode from 'dockerode';
import type { Artifact, ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import type { Workspaces } from '@sandgate/storage';
import type { EventSink, ExecutionBackend } from '../backend.ts';
import { collectArtifacts, snapshot, type Snapshot } from '../shared/artifacts.ts';
import { executionOf, isOrphan, MANAGED_SELECTOR } from '../shared/labels.ts';
import { silentLogger, type BackendLogger } from '../shared/logger.ts';
import { DEFAULT_MAX_OUTPUT_BYTES, OutputCollector } from '../shared/output.ts';
import { buildResult, outcomeOf, type RunEnd } from '../shared/result.ts';
import { containerName, containerSpec, type SandboxSettings } from './container-spec.ts';
import { engineError, imageMissing, isNotFound, statusOf } from './engine-errors.ts';
import { runContainer } from './run-container.ts';

export interface DockerBackendOptions {
  /** Engine client. Default: `new Dockerode()`, the local socket (or DOCKER_HOST). */
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
  /** pino-like logger. Default: silent. */
  logger?: BackendLogger;
}

/** Runs each execution in its own locked-down container on one Docker engine. */
export class DockerBackend implements ExecutionBackend {
  readonly name = 'docker';
  readonly #docker: Dockerode;
  readonly #settings: SandboxSettings;
  readonly #workspaces: Workspaces;
  readonly #maxOutputBytes: number;
  readonly #artifactUrl: (sessionId: string, path: string) => string;
  readonly #log: BackendLogger;
  // Executions in flight here: sweep never removes them, whatever `live` the caller computed.
  readonly #running = new Set<string>();

  constructor({
    docker = new Dockerode(), image = 'sandgate/runtime:1', runtime, workspaces, user = '1000:1000',
    pidsLimit = 128, tmpfsBytes = 64 * 1024 * 1024, maxOutputBytes = DEFAULT_MAX_OUTPUT_BYTES, nofile = 1024,
    artifactUrl, logger = silentLogger,
  }: DockerBackendOptions) {
    this.#docker = docker;
    this.#settings = { image, runtime, user, pidsLimit, tmpfsBytes, nofile };
    this.#workspaces = workspaces;
    this.#maxOutputBytes = maxOutputBytes;
    this.#artifactUrl = artifactUrl;
    this.#log = logger;
  }

  async execute(job: ExecutionJob, events: EventSink, signal: AbortSignal): Promise<ExecutionResult> {
    this.#running.add(job.execution_id);
    try {
      return await this.#execute(job, events, signal);
    } finally {
      this.#running.delete(job.execution_id);
    }
  }

  async #execute(job: ExecutionJob, events: EventSink, signal: AbortSignal): Promise<ExecutionResult> {
    // Idempotent: makes a missing workspace and gives it back to the sandbox user if it was not.
    const dir = await this.#workspaces.create(job.session_id);
    const before = await snapshot(dir);
    const stdout = new OutputCollector((text) => events.stdout(text), this.#maxOutputBytes);
    const stderr = new OutputCollector((text) => events.stderr(text), this.#maxOutputBytes);
    const finish = (end: RunEnd, durationMs: number, artifacts: Artifact[] = []): ExecutionResult =>
      buildResult({ end, limits: job, stdout, stderr, artifacts, durationMs });
    const neverRan: RunEnd = { exitCode: -1, timedOut: false, oomKilled: false, cancelled: true };
    events.phase('starting');
    if (signal.aborted) return finish(neverRan, 0);
    const container = await this.#create(job, dir);
    try {
      const run = await runContainer(
        container,
        { stdout: stdout.writable(), stderr: stderr.writable(), stdin: job.stdin },
        { timeoutMs: job.timeout_ms, signal, onStarted: () => events.phase('running') },
      ).catch((err: unknown) => { throw engineError(err, this.#settings.image); });
      stdout.end();
      stderr.end();
      if (!run.started) return finish(run, 0);
      events.phase('harvesting');
      const result = finish(run, run.durationMs, await this.#harvest(job, dir, before, run, events));
      this.#log.info({ executionId: job.execution_id, state: result.state, exitCode: result.exit_code, durationMs: result.duration_ms }, 'execution finished');
      return result;
    } finally {
      await this.#remove(container, job.execution_id);
    }
  }

  /** The artifacts of a completed run, each reported as an event too; a run that did not complete has none. */
  async #harvest(job: ExecutionJob, dir: string, before: Snapshot, end: RunEnd, events: EventSink): Promise<Artifact[]> {
    if (outcomeOf(end, job).state !== 'completed') return [];
    const artifacts = await collectArtifacts(dir, before, { sessionId: job.session_id, artifactUrl: this.#artifactUrl });
    for (const artifact of artifacts) events.artifact(artifact);
    return artifacts;
  }

  /** Removes every managed container no live execution owns; answers with their execution ids. */
  async sweep(live: ReadonlySet<string>): Promise<{ removed: string[] }> {
    const keep = new Set([...live, ...this.#running]);
    const containers = await this.#docker
      .listContainers({ all: true, filters: { label: [MANAGED_SELECTOR] } })
      .catch((err: unknown) => { throw engineError(err, this.#settings.image); });
    const removed: string[] = [];
    for (const info of containers) {
      if (!isOrphan(info.Labels, keep)) continue;
      await this.#remove(this.#docker.getContainer(info.Id), executionOf(info.Labels) ?? info.Id);
      removed.push(executionOf(info.Labels) ?? info.Id);
    }
    if (removed.length > 0) this.#log.info({ removed }, 'swept orphaned sandboxes');
    return { removed };
  }

  async check(): Promise<void> {
    const { image } = this.#settings;
    await this.#docker.ping().catch((err: unknown) => { throw engineError(err, image); });
    await this.#docker.getImage(image).inspect().catch((err: unknown) => {
      throw isNotFound(err) ? imageMissing(image, err) : engineError(err, image);
    });
  }

  /** Holds no connection or timer of its own: safe to call at any time, any number of times. */
  async close(): Promise<void> {}


  async #create(job: ExecutionJob, dir: string): Promise<Dockerode.Container> {
    const spec = containerSpec(job, dir, this.#settings);
    try {
      return await this.#docker.createContainer(spec);
    } catch (err) {
      if (statusOf(err) !== 409) throw engineError(err, this.#settings.image);
    }
    // The name is taken: a retry of this execution after its worker died. Its old sandbox goes.
    this.#log.warn({ executionId: job.execution_id }, 'replacing a leftover sandbox of this execution');
    await this.#remove(this.#docker.getContainer(containerName(job.execution_id)), job.execution_id);
    return this.#docker.createContainer(spec).catch((err: unknown) => { throw engineError(err, this.#settings.image); });
  }

  async #remove(container: Dockerode.Container, executionId: string): Promise<void> {
    try {
      await container.remove({ force: true });
    } catch (err) {
      // Already gone (a sweep or a concurrent remove got there first) is what we wanted.
      if (!isNotFound(err)) this.#log.warn({ executionId, err }, 'could not remove sandbox; sweep will retry');
    }
  }
}
