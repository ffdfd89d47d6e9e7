import { lstat } from 'node:fs/promises';
import type Dockerode from 'dockerode';
import { SandgateError, type ExecutionJob } from '@sandgate/contracts';
import { volumeDir } from '@sandgate/storage';
import { deploymentOf, LABELS, sessionLabels } from '../housekeeping/labels.ts';
import type { BackendLogger } from '../logger.ts';
import type { AgentChannel } from '../agent/agent-channel.ts';
import { attachAgent } from './agent-attach.ts';
import { agentSpec, agentUid, sessionContainerName, type Prewarm, type VolumeBind } from './agent-spec.ts';
import { prepareServices, servicesDirOf } from '../services.ts';
import { AttachCache } from '../agent/attach-cache.ts';
import { resources, type SandboxLimits, type SandboxSettings } from './container-spec.ts';
import { engineError, forceRemove, isNotFound, statusOf } from './engine-errors.ts';
import type { Death } from '../agent/agent-run.ts';
import type { SessionHost } from '../run/session-run.ts';
import { deathOf } from './sandbox-death.ts';
import type { EgressSockets } from './egress-sockets.ts';

/** A session's sandbox, attached for one run; give it back with release(). */
export interface SessionSandbox {
  sessionId: string;
  /** The engine's id of the container (its name can be reused by a replacement). */
  id: string;
  container: Dockerode.Container;
  channel: AgentChannel;
  /** It took the place of an earlier sandbox of this session: its first interpreter is a restart. */
  replaces: boolean;
  /** It was made for this acquire. */
  created?: boolean;
  /** The session generation it was made for (POST /v1/sessions/:id/restart moves the session past it). */
  generation: number;
  /** Its memory and CPUs. */
  limits: SandboxLimits;
  /** `egress`: it reaches its tenant's allowed hosts through the egress proxy; absent: no network. */
  network: 'egress' | undefined;
}

/** Sessions whose sandbox this worker has seen, to tell a sandbox removed behind its back from a first use. */
const MAX_REMEMBERED = 10_000;
/** A running agent answers a ping in well under a millisecond; this much covers a very busy host. */
const HANDSHAKE_TIMEOUT_MS = 10_000;

/**
 * Finds, makes and replaces sessions' long-lived sandboxes. Stateless across workers: a session's sandbox is found
 * by its deterministic name, whichever worker made it; the caller runs one execution per session at a time.
 */
export class SessionSandboxes implements SessionHost<SessionSandbox> {
  readonly #docker: Dockerode;
  readonly #settings: SandboxSettings;
  readonly #log: BackendLogger;
  readonly #readyTimeoutMs: number;
  readonly #seen = new Set<string>();
  readonly #attached = new AttachCache<SessionSandbox>();

  readonly #egress: EgressSockets | undefined;
  /** The data directory, where each session's services directory is (services.ts). */
  readonly #dataDir: string;

  constructor(
    docker: Dockerode,
    settings: SandboxSettings,
    log: BackendLogger,
    readyTimeoutMs: number,
    dataDir: string,
    egress?: EgressSockets,
  ) {
    this.#dataDir = dataDir;
    this.#docker = docker;
    this.#settings = settings;
    this.#log = log;
    this.#readyTimeoutMs = readyTimeoutMs;
    this.#egress = egress;
  }

  /**
   * The session's running sandbox, attached, with the job's memory and CPUs. A missing one is made; one that is
   * stopped, of an older generation, or whose limits cannot be changed is replaced (the files are on the host).
   */
  async acquire(job: ExecutionJob, dir: string): Promise<SessionSandbox> {
    const sessionId = job.session_id;
    const container = this.#docker.getContainer(sessionContainerName(sessionId));
    const network = await this.#network(job);
    const kept = this.#attached.take(sessionId);
    // An attach kept open since the session's last run proves its sandbox has been running all along (the stream
    // ends with the container, and a replacement removes it first): no need to ask the engine.
    if (
      kept !== undefined &&
      kept.generation >= job.generation &&
      kept.limits.memory_mb === job.memory_mb &&
      kept.limits.cpus === job.cpus &&
      kept.network === network
    ) {
      return kept;
    }
    // Both at once: attaching costs a round trip as long as inspecting, and a live sandbox is the common case.
    const [info, attached] = await Promise.all([
      container.inspect().catch((err: unknown) => {
        if (isNotFound(err)) return undefined;
        throw err;
      }),
      kept === undefined ? attachAgent(container).catch(() => undefined) : undefined,
    ]);
    let channel = attached ?? kept?.channel;
    let replaces = this.#seen.has(sessionId);
    if (info !== undefined) {
      const labels = info.Config.Labels ?? {};
      if (deploymentOf(labels) !== this.#settings.deployment || labels[LABELS.session] !== sessionId) {
        channel?.close();
        throw new SandgateError('backend_unavailable', `container ${info.Name} belongs to another sandgate deployment`);
      }
      if (kept !== undefined && kept.id !== info.Id) {
        // The kept attach is to a sandbox another worker has replaced since.
        kept.channel.close();
        channel = await attachAgent(container).catch(() => undefined);
      }
      // An attach kept from an earlier run has answered its handshake already.
      const verified = channel !== undefined && channel === kept?.channel;
      if (
        channel !== undefined &&
        info.State.Running &&
        !info.State.Paused &&
        Number(labels[LABELS.generation]) >= job.generation &&
        labels[LABELS.network] === network &&
        (await this.#fit(container, info, job)) &&
        (verified || (await this.#answers(channel)))
      ) {
        this.#remember(sessionId);
        return {
          sessionId,
          id: info.Id,
          container,
          channel,
          replaces: labels[LABELS.replaces] === 'true',
          generation: Number(labels[LABELS.generation]),
          limits: { memory_mb: job.memory_mb, cpus: job.cpus },
          network,
        };
      }
      this.#log.info(
        { sessionId, running: info.State.Running, generation: labels[LABELS.generation] },
        'replacing session sandbox',
      );
      replaces = true;
      await forceRemove(container);
    }
    channel?.close();
    return this.#create(job, dir, replaces, network);
  }

  /** Done with a run: its attach is kept for the session's next run, unless the sandbox ended. */
  release(sandbox: SessionSandbox): void {
    this.#attached.put(sandbox.sessionId, sandbox);
  }

  /** The session's running sandbox, attached (the kept attach, else a new one that has answered), or undefined. */
  async find(sessionId: string): Promise<SessionSandbox | undefined> {
    const kept = this.#attached.take(sessionId);
    if (kept !== undefined && !kept.channel.closed) return kept;
    const container = this.#docker.getContainer(sessionContainerName(sessionId));
    const info = await container.inspect().catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    const labels = info?.Config.Labels ?? {};
    if (info === undefined || !info.State.Running || labels[LABELS.session] !== sessionId) return undefined;
    if (deploymentOf(labels) !== this.#settings.deployment) return undefined;
    const channel = await attachAgent(container).catch(() => undefined);
    if (channel === undefined || !(await this.#answers(channel))) {
      channel?.close();
      return undefined;
    }
    return {
      sessionId,
      id: info.Id,
      container,
      channel,
      replaces: labels[LABELS.replaces] === 'true',
      generation: Number(labels[LABELS.generation]),
      limits: { memory_mb: Math.round(info.HostConfig.Memory! / (1 << 20)), cpus: info.HostConfig.NanoCpus! / 1e9 },
      network: labels[LABELS.network] === 'egress' ? 'egress' : undefined,
    };
  }

  /** Removes the session's sandbox (and forgets its attach); one that is not there is fine. */
  async remove(sessionId: string): Promise<void> {
    this.#attached.take(sessionId)?.channel.close();
    await forceRemove(this.#docker.getContainer(sessionContainerName(sessionId)));
  }

  /** Kills a sandbox whose run could not be ended otherwise; it stays, stopped, so the next run knows to restart. */
  async kill(sandbox: Pick<SessionSandbox, 'container'>): Promise<void> {
    await sandbox.container.kill({ signal: 'SIGKILL' }).catch((err: unknown) => {
      if (!isNotFound(err) && statusOf(err) !== 409) throw err;
    });
  }

  death(sandbox: SessionSandbox, _job: ExecutionJob, sinceMs: number): Promise<Death> {
    return deathOf(sandbox.container, () => this.kill(sandbox), sinceMs);
  }

  failure(err: unknown): Error {
    return engineError(err, this.#settings.image);
  }

  /** Forgets sessions that are gone (and closes their kept attaches), so what this worker remembers stays small. */
  forget(live: ReadonlySet<string>): void {
    for (const id of this.#seen) if (!live.has(id)) this.#seen.delete(id);
    this.#attached.retain(live);
  }

  /** Closes every kept attach; the sandboxes themselves live on for any worker to use. */
  close(): void {
    this.#attached.close();
  }

  /**
   * The network the session's sandbox gets for this run: egress when its job asks for it (its tenant is allowed
   * egress), this worker can serve its proxy socket, and the session has not become private since the run was queued.
   */
  async #network(job: ExecutionJob): Promise<'egress' | undefined> {
    if (this.#egress === undefined) return undefined;
    if (job.network === 'egress' && (await this.#egress.open(job.session_id, job.tenant))) return 'egress';
    this.#egress.proxy.cut(job.session_id);
    return undefined;
  }

  /** Whether the agent of a running sandbox answers on this attach; one that does not is in no state to run code. */
  async #answers(channel: AgentChannel): Promise<boolean> {
    try {
      await channel.handshake(HANDSHAKE_TIMEOUT_MS);
      return true;
    } catch (err) {
      this.#log.warn({ err }, 'session sandbox does not answer; replacing it');
      return false;
    }
  }

  /** Gives a running sandbox the job's memory and CPUs, in place, keeping its state; false when it cannot. */
  async #fit(
    container: Dockerode.Container,
    info: Dockerode.ContainerInspectInfo,
    job: ExecutionJob,
  ): Promise<boolean> {
    const want = resources(job);
    if (info.HostConfig.Memory === want.Memory && info.HostConfig.NanoCpus === want.NanoCpus) return true;
    try {
      await container.update(want);
      return true;
    } catch (err) {
      this.#log.warn({ sessionId: job.session_id, err }, 'could not change the session sandbox limits; replacing it');
      return false;
    }
  }

  async #create(
    job: ExecutionJob,
    dir: string,
    replaces: boolean,
    network: 'egress' | undefined,
  ): Promise<SessionSandbox> {
    // A stateful session's interpreter starts with its agent; process sessions keep a python started ahead.
    const prewarm: Prewarm = job.sandbox === 'stateful' ? 'interpreter' : 'always';
    // A new sandbox, a new services socket: what ran in the one it replaces has ended with it. A data disk too full
    // for its token costs the session its services, not its run.
    const tokenSha256 = await prepareServices(this.#dataDir, job.session_id, agentUid(this.#settings)).catch(
      (err: unknown) => {
        this.#log.warn({ sessionId: job.session_id, err }, 'no services socket for this session sandbox');
        return undefined;
      },
    );
    const volumes = await this.#volumes(job);
    const spec = agentSpec(
      {
        name: sessionContainerName(job.session_id),
        volumes,
        labels: sessionLabels({ ...job, network }, this.#settings.deployment, replaces),
        limits: job,
        workspaceDir: dir,
        ...(network === 'egress' ? { egressDir: this.#egress!.dirOf(job.session_id) } : {}),
        ...(tokenSha256 === undefined
          ? {}
          : { services: { dir: servicesDirOf(this.#dataDir, job.session_id), tokenSha256 } }),
        prewarm,
      },
      // The session's template's image, fixed when the session was made; absent: the runtime image.
      job.image === undefined ? this.#settings : { ...this.#settings, image: job.image },
    );
    let container: Dockerode.Container;
    try {
      container = await this.#docker.createContainer(spec);
    } catch (err) {
      // 409: the name is still taken (a removal in progress, or a sandbox made since we looked): it goes.
      if (statusOf(err) !== 409) throw err;
      await forceRemove(this.#docker.getContainer(spec.name!));
      container = await this.#docker.createContainer(spec);
    }
    try {
      const channel = await attachAgent(container);
      try {
        await container.start();
        await channel.handshake(this.#readyTimeoutMs);
      } catch (err) {
        channel.close();
        throw err;
      }
      this.#remember(job.session_id);
      return {
        sessionId: job.session_id,
        id: container.id,
        container,
        channel,
        replaces,
        created: true,
        generation: job.generation,
        limits: { memory_mb: job.memory_mb, cpus: job.cpus },
        network,
      };
    } catch (err) {
      await forceRemove(container).catch(() => {});
      throw err;
    }
  }

  /**
   * The session's volumes as bind mounts. A volume whose directory is gone (deleted behind sandgate's back) fails the
   * run with a clear error: the engine would otherwise make an empty root-owned directory in its place.
   */
  async #volumes(job: ExecutionJob): Promise<VolumeBind[]> {
    const binds: VolumeBind[] = [];
    for (const v of job.volumes ?? []) {
      const source = volumeDir(this.#dataDir, v.id);
      const st = await lstat(source).catch(() => undefined);
      if (!st?.isDirectory()) {
        throw new SandgateError('volume_not_found', `volume ${v.name} (${v.id}) has no directory on this worker`);
      }
      binds.push({ source, target: v.path, readOnly: v.read_only });
    }
    return binds;
  }

  #remember(sessionId: string): void {
    if (this.#seen.size >= MAX_REMEMBERED && !this.#seen.has(sessionId)) {
      const oldest = this.#seen.values().next().value;
      if (oldest !== undefined) this.#seen.delete(oldest);
    }
    this.#seen.add(sessionId);
  }
}
