import { randomBytes } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import { SandgateError, type ExecutionJob, type JobVolume } from '@sandgate/contracts';
import type { Volumes } from '@sandgate/storage';
import type { AgentChannel } from '../agent/agent-channel.ts';
import type { Death } from '../agent/agent-run.ts';
import type { TransferFailure } from '../artifacts/artifact-store.ts';
import { AttachCache } from '../agent/attach-cache.ts';
import { deploymentOf, LABELS } from '../housekeeping/labels.ts';
import type { HeldSandbox, SessionHost } from '../run/session-run.ts';
import { clusterError, messageOf, statusOf } from './api.ts';
import { sleep, type AgentPods } from './agent-pods.ts';
import type { EgressLinks } from './egress-links.ts';
import { newServicesToken, publishServices, withdrawServices } from '../services.ts';
import {
  AGENT_CONTAINER,
  AGENT_TOKEN_ANNOTATION,
  madeWithLimits,
  SERVICES_TOKEN_ANNOTATION,
  sessionPod,
  sessionPodName,
  volumeOfEmptyDir,
} from './pod-spec.ts';
import { viewOf } from './pod-status.ts';
import { pullFiles, pushFiles, type Baseline, type PullBounds } from './session-files.ts';
import { SyncedFiles, volumeKey, type PodBaselines } from './synced-files.ts';

/** A session's Pod, connected for one run. */
export interface SessionPod extends HeldSandbox {
  sessionId: string;
  name: string;
  uid: string;
  generation: number;
  memoryMb: number;
  cpus: number;
  /** `egress`: its sandbox reaches its tenant's allowed hosts through this worker's links; absent: no network. */
  network: 'egress' | undefined;
  /** The files as the current run began (set by prepare): `whole`, they were all listed. */
  baseline?: { baseline: Baseline; whole: boolean };
  /** Where the worker reaches the Pod: its IP, and the token its agent and volumes container take. */
  address: { ip: string; token: string };
  /** The connection to the Pod's volumes container, made by the first run that needs it and kept with the agent's. */
  volumes?: AgentChannel | undefined;
  /** Each read-write volume's files as the current run began, by volumeKey (set by prepare). */
  volumeBaselines?: Map<string, Baseline>;
}

/** How long a new Pod's volumes container may take to listen once the agent's has (python start-up). */
const VOLUMES_CONNECT_MS = 30_000;
/** Killed sessions remembered at most (kill, acquire). */
const MAX_KILLED = 10_000;

/**
 * Finds, makes and replaces sessions' long-lived Pods, exec-free: the worker reaches each Pod's agent over TCP at the
 * Pod IP, with a per-Pod token (see AgentPods). Stateless across worker replicas: a session's Pod is found by its
 * deterministic name and its token read from the Pod itself. A connection is kept between runs of a session, so a
 * run on a live session costs one API call (a look at its Pod) and no new connection.
 */
export class SessionPods implements SessionHost<SessionPod> {
  readonly #kept = new AttachCache<SessionPod>();
  /** Sessions whose Pod this worker killed (kill): their next Pod replaces it. */
  readonly #killed = new Set<string>();

  readonly #pods: AgentPods;
  readonly #maxFileBytes: number;
  /** The data directory the gateway shares, where a session's services address goes (services.ts). */
  readonly #dataDir: string;
  /** The store of the volumes' files, which a session Pod's copies are made from and brought back to. */
  readonly #volumes: Volumes;
  /** Egress of the sessions whose tenant SANDGATE_EGRESS allows; absent: no session Pod has network. */
  readonly #egress: EgressLinks | undefined;
  /** What each session Pod's files and the store were when last made the same, kept for whichever worker is next. */
  readonly synced: SyncedFiles;
  constructor(pods: AgentPods, maxFileBytes: number, dataDir: string, volumes: Volumes, egress?: EgressLinks) {
    this.#pods = pods;
    this.#maxFileBytes = maxFileBytes;
    this.#dataDir = dataDir;
    this.synced = new SyncedFiles(dataDir);
    this.#volumes = volumes;
    this.#egress = egress;
  }

  async acquire(job: ExecutionJob): Promise<SessionPod> {
    const pods = this.#pods;
    const name = sessionPodName(job.session_id);
    const network = await this.#network(job);
    const kept = this.#kept.take(job.session_id);
    // A kept connection is used only while its Pod is still the session's, running and not being deleted: a Pod
    // being deleted lets its agent serve on for a moment (the grace period), and would take a run it cannot finish.
    if (kept !== undefined && this.#fits(kept, job) && kept.network === network) {
      const pod = await pods.read(name).catch(() => undefined);
      if (pod?.metadata?.uid === kept.uid && !pod.metadata.deletionTimestamp && pod.status?.phase === 'Running') {
        this.#linkEgress(pod, job);
        return kept;
      }
    }
    kept?.channel.close();
    kept?.volumes?.close();
    // A Pod this worker killed is gone, not left stopped as a Docker sandbox is: remembered, so its successor's first
    // interpreter is reported as the restart it is.
    let replaces = this.#killed.delete(job.session_id) || kept !== undefined;
    const deadline = Date.now() + pods.timing.startupMs;
    for (;;) {
      const pod = await pods.read(name);
      if (pod === undefined) {
        const made = await this.#create(job, replaces, network);
        if (made !== undefined) return { ...(await this.#connect(made, job, deadline)), created: true };
        continue; // another worker made it meanwhile: look again
      }
      const labels = pod.metadata?.labels ?? {};
      if (deploymentOf(labels) !== pods.settings.deployment || labels[LABELS.session] !== job.session_id) {
        throw new SandgateError('backend_unavailable', `Pod ${name} belongs to another sandgate deployment`);
      }
      if (pod.metadata?.deletionTimestamp !== undefined) {
        replaces = true;
        await pods.waitGone(name, deadline);
        continue;
      }
      const view = viewOf(pod);
      const stale =
        Number(labels[LABELS.generation]) < job.generation ||
        !madeWithLimits(pod, job) ||
        labels[LABELS.network] !== network ||
        view.phase === 'Failed' ||
        view.phase === 'Succeeded';
      if (!stale) {
        const found = await this.#connect(pod, job, deadline).catch((err: unknown) => {
          pods.log.warn(
            { sessionId: job.session_id, err: messageOf(err) },
            'session Pod does not answer; replacing it',
          );
          return undefined;
        });
        if (found !== undefined) return found;
      } else {
        pods.log.info({ sessionId: job.session_id, phase: view.phase }, 'replacing session Pod');
      }
      replaces = true;
      await pods.delete(name, pod.metadata?.uid);
    }
  }

  release(sandbox: SessionPod): void {
    this.#kept.put(sandbox.sessionId, sandbox);
  }

  /** The session's running Pod, connected (the kept connection while its Pod is the same), or undefined. */
  async find(sessionId: string): Promise<SessionPod | undefined> {
    const pods = this.#pods;
    const name = sessionPodName(sessionId);
    const kept = this.#kept.take(sessionId);
    const pod = await pods.read(name);
    const labels = pod?.metadata?.labels ?? {};
    if (
      pod === undefined ||
      pod.metadata?.deletionTimestamp !== undefined ||
      pod.status?.phase !== 'Running' ||
      labels[LABELS.session] !== sessionId ||
      deploymentOf(labels) !== pods.settings.deployment
    ) {
      kept?.channel.close();
      return undefined;
    }
    if (kept !== undefined && kept.uid === pod.metadata?.uid && !kept.channel.closed) return kept;
    kept?.channel.close();
    const connected = await pods.connectWhenRunning(pod, Date.now() + pods.timing.handshakeMs).catch(() => undefined);
    if (connected === undefined) return undefined;
    const limits = pod.spec?.containers.find((c) => c.name === AGENT_CONTAINER)?.resources?.limits ?? {};
    return {
      sessionId,
      name,
      uid: pod.metadata!.uid!,
      channel: connected.channel,
      address: {
        ip: connected.pod.status!.podIP!,
        token: connected.pod.metadata!.annotations![AGENT_TOKEN_ANNOTATION]!,
      },
      replaces: labels[LABELS.replaces] === 'true',
      generation: Number(labels[LABELS.generation]),
      memoryMb: Number.parseInt(limits.memory ?? '0', 10),
      cpus: Number(limits.cpu ?? 0),
      network: labels[LABELS.network] === 'egress' ? 'egress' : undefined,
    };
  }

  /** Deletes the session's Pod (and its kept connection); one that is not there is fine. */
  async remove(sessionId: string): Promise<void> {
    this.#kept.take(sessionId)?.channel.close();
    await withdrawServices(this.#dataDir, sessionId);
    await this.synced.remove(sessionId);
    const name = sessionPodName(sessionId);
    const pod = await this.#pods.read(name);
    if (pod !== undefined) await this.#pods.delete(name, pod.metadata?.uid);
  }

  async kill(sandbox: SessionPod): Promise<void> {
    this.#killed.add(sandbox.sessionId);
    if (this.#killed.size > MAX_KILLED) this.#killed.delete(this.#killed.values().next().value!);
    await withdrawServices(this.#dataDir, sandbox.sessionId);
    await this.synced.remove(sandbox.sessionId);
    await this.#pods.delete(sandbox.name, sandbox.uid);
  }

  death(sandbox: SessionPod, job: ExecutionJob): Promise<Death> {
    return this.#pods.death(sandbox.name, sandbox.uid, (emptyDir) => {
      const v = volumeOfEmptyDir(job, emptyDir);
      return (
        v && `The volume ${v.name} (${v.path}) outgrew its size of ${v.size_bytes} bytes; the sandbox was evicted.`
      );
    });
  }

  failure(err: unknown): Error {
    return err instanceof SandgateError ? err : clusterError(err, 'starting the session Pod');
  }

  /**
   * Before a run: the session's files to the agent, and every volume's files to the volumes container, so a reader
   * sees each volume as the store holds it when its run begins (what a writer's last run brought back). What the Pod
   * changed since the last sync (a terminal's or a service's writes and deletions, in the workspace or a read-write
   * volume) is brought back to the store first, so the push keeps it. Without a baseline for this Pod (a fresh Pod,
   * whose workspace is empty; or one whose baseline was lost) nothing is brought back: the push makes the Pod what the
   * store holds, as it did before baselines were kept.
   */
  async prepare(sandbox: SessionPod, job: ExecutionJob, dir: string): Promise<void> {
    // Kept for this very Pod (its uid): a Pod made since has its own workspace, empty at first.
    const kept = await this.synced.load(job.session_id, sandbox.uid);
    if (kept.workspace !== undefined) {
      const log = this.#pods.log;
      await pullFiles(sandbox.channel, kept.workspace, dir, this.#maxFileBytes, log, job.session_id, this.#ownBounds());
    }
    sandbox.baseline = await pushFiles(sandbox.channel, dir, this.#pods.log);
    // Kept as pushed too: a worker that ends mid-run leaves the next one the state the run began from.
    const pushed: PodBaselines = {
      workspace: sandbox.baseline.whole ? sandbox.baseline.baseline : undefined,
      volumes: new Map(),
    };
    if (!job.volumes?.length) return this.#keep(job.session_id, sandbox.uid, pushed);
    const channel = await this.#volumesChannel(sandbox);
    sandbox.volumeBaselines = new Map();
    for (const v of job.volumes) {
      const files = channel.files(v.path);
      // A read-only volume is read-only in the Pod too: nothing to bring back.
      const before = v.read_only ? undefined : kept.volumes.get(volumeKey(v));
      if (before !== undefined) {
        const log = this.#pods.log;
        await pullFiles(
          files,
          before,
          this.#volumes.dir(v.id),
          v.size_bytes,
          log,
          job.session_id,
          this.#volumeBounds(v),
        );
      }
      const volume = await pushFiles(files, this.#volumes.dir(v.id), this.#pods.log);
      sandbox.volumeBaselines.set(volumeKey(v), volume.baseline);
      if (!v.read_only && volume.whole) pushed.volumes.set(volumeKey(v), volume.baseline);
    }
    await this.#keep(job.session_id, sandbox.uid, pushed);
  }

  /**
   * After a run: what it wrote in the workspace, and in each read-write volume, back to the store. A volume's files
   * are bounded by its size (its emptyDir's limit evicts the Pod past it a little later): what does not fit is not
   * kept, and the run says so (disk_quota). Then the baselines are kept for the session's next run (SyncedFiles).
   */
  async collect(
    sandbox: SessionPod,
    job: ExecutionJob,
    dir: string,
  ): Promise<{ failed: TransferFailure[]; diskQuota?: string }> {
    const pushed = sandbox.baseline;
    sandbox.baseline = undefined;
    const quota = this.#ownBounds().totalBytes;
    const own = await pullFiles(
      sandbox.channel,
      pushed?.baseline,
      dir,
      this.#maxFileBytes,
      this.#pods.log,
      job.session_id,
      this.#ownBounds(),
    );
    // Files written faster than the kubelet looks at the emptyDir's limit are still over the session's disk quota
    // (or its directory's own, a fork's copy's included): not kept, and the run fails as a full disk makes it fail.
    const ownFull =
      own.full &&
      `Files the run wrote did not fit in the session's disk quota${quota === undefined ? '' : ` of ${quota} bytes`} ` +
        'and were not kept.';
    const synced: PodBaselines = { workspace: own.synced, volumes: new Map() };
    const baselines = sandbox.volumeBaselines;
    sandbox.volumeBaselines = undefined;
    const writable = (job.volumes ?? []).filter((v) => !v.read_only);
    const failed = [...own.failed];
    let full: JobVolume | undefined;
    if (baselines !== undefined && sandbox.volumes !== undefined) {
      for (const v of writable) {
        const pulled = await pullFiles(
          sandbox.volumes.files(v.path),
          baselines.get(volumeKey(v)),
          this.#volumes.dir(v.id),
          v.size_bytes,
          this.#pods.log,
          job.session_id,
          this.#volumeBounds(v),
        );
        failed.push(...pulled.failed.map((f) => ({ ...f, path: `${v.path}/${f.path}` })));
        if (pulled.full) full ??= v;
        if (pulled.synced !== undefined) synced.volumes.set(volumeKey(v), pulled.synced);
      }
    }
    await this.#keep(job.session_id, sandbox.uid, synced);
    const diskQuota =
      ownFull ||
      (full &&
        `Files the run wrote to the volume ${full.name} (${full.path}) did not fit in its size of ` +
          `${full.size_bytes} bytes and were not kept.`);
    return { failed, ...(diskQuota ? { diskQuota } : {}) };
  }

  /**
   * Before the session's Pod goes (a pause): brings back what it changed in the workspace since the last sync (a
   * terminal's, a service's files), as the next run would have. A read-write volume's changes since its last run are
   * not: a pause has no job naming the session's volumes and their sizes. Without a baseline, nothing comes back.
   */
  async bringBack(sessionId: string, dir: string): Promise<void> {
    const sandbox = await this.find(sessionId);
    if (sandbox === undefined) return;
    try {
      const kept = await this.synced.load(sessionId, sandbox.uid);
      if (kept.workspace === undefined) return;
      const log = this.#pods.log;
      await pullFiles(sandbox.channel, kept.workspace, dir, this.#maxFileBytes, log, sessionId, this.#ownBounds());
    } finally {
      this.release(sandbox);
    }
  }

  /** Keeps the baselines for the session's next run; one that cannot be kept costs that run only the old behaviour. */
  async #keep(sessionId: string, uid: string, baselines: PodBaselines): Promise<void> {
    await this.synced.remove(sessionId).catch(() => {});
    await this.synced.save(sessionId, uid, baselines).catch((err: unknown) => {
      this.#pods.log.warn({ sessionId, err: messageOf(err) }, "could not keep the baseline of the session Pod's files");
    });
  }

  #ownBounds(): PullBounds {
    const quota = this.#maxFileBytes < Number.MAX_SAFE_INTEGER ? this.#maxFileBytes : undefined;
    return { what: "the session's disk quota", ...(quota === undefined ? {} : { totalBytes: quota }) };
  }

  #volumeBounds(v: JobVolume): PullBounds {
    return { what: `the size of volume ${v.name}`, totalBytes: v.size_bytes };
  }

  /** The kept connection to the Pod's volumes container, or a new one (retried while the container starts). */
  async #volumesChannel(sandbox: SessionPod): Promise<AgentChannel> {
    if (sandbox.volumes !== undefined && !sandbox.volumes.closed) return sandbox.volumes;
    const { ip, token } = sandbox.address;
    const deadline = Date.now() + VOLUMES_CONNECT_MS;
    for (;;) {
      try {
        sandbox.volumes = await this.#pods.connectPort(ip, this.#pods.settings.volumesPort, token, deadline);
        return sandbox.volumes;
      } catch (err) {
        if (Date.now() > deadline) {
          throw new SandgateError(
            'backend_unavailable',
            `the volumes container of Pod ${sandbox.name} does not answer: ${messageOf(err)}`,
          );
        }
        await sleep(this.#pods.timing.pollMs);
      }
    }
  }

  /** Closes the connections of sessions that are gone. */
  forget(live: ReadonlySet<string>): void {
    this.#kept.retain(live);
  }

  get connected(): number {
    return this.#kept.size;
  }

  close(): void {
    this.#kept.close();
  }

  #fits(kept: SessionPod, job: ExecutionJob): boolean {
    return kept.generation >= job.generation && kept.memoryMb === job.memory_mb && kept.cpus === job.cpus;
  }

  /**
   * The network the session's Pod gets for this run: egress when its job asks for it (its tenant is allowed egress),
   * this worker carries egress, and the session has not become private since the run was queued.
   */
  async #network(job: ExecutionJob): Promise<'egress' | undefined> {
    if (this.#egress === undefined) return undefined;
    if (job.network === 'egress' && !(await this.#egress.proxy.settings.isPrivate(job.session_id))) return 'egress';
    this.#egress.proxy.cut(job.session_id);
    return undefined;
  }

  /** Keeps egress links parked with a Pod that has egress (every worker that runs the session does). */
  #linkEgress(pod: k8s.V1Pod, job: ExecutionJob): void {
    const host = pod.status?.podIP;
    const token = pod.metadata?.annotations?.[AGENT_TOKEN_ANNOTATION];
    if (this.#egress === undefined || pod.metadata?.labels?.[LABELS.network] !== 'egress' || !host || !token) return;
    this.#egress.start(job.session_id, job.tenant, { host, port: this.#pods.settings.agentPort, token });
  }

  /** Creates the session's Pod; undefined when one by that name exists (made by another worker, or still going). */
  async #create(job: ExecutionJob, replaces: boolean, network: 'egress' | undefined): Promise<k8s.V1Pod | undefined> {
    const token = randomBytes(32).toString('base64url');
    const servicesToken = newServicesToken();
    try {
      const spec = sessionPod({ ...job, network }, this.#pods.settings, { token, servicesToken, replaces });
      return await this.#pods.api.createPod(spec);
    } catch (err) {
      if (statusOf(err) === 409) return undefined;
      throw clusterError(err, 'creating the session Pod');
    }
  }

  async #connect(pod: k8s.V1Pod, job: ExecutionJob, deadline: number): Promise<SessionPod> {
    const { pod: running, channel } = await this.#pods.connectWhenRunning(pod, deadline);
    await this.#publishServices(running, job.session_id);
    this.#linkEgress(running, job);
    const labels = running.metadata?.labels ?? {};
    return {
      sessionId: job.session_id,
      name: running.metadata!.name!,
      uid: running.metadata!.uid!,
      channel,
      address: {
        ip: running.status!.podIP!,
        token: running.metadata!.annotations![AGENT_TOKEN_ANNOTATION]!,
      },
      replaces: labels[LABELS.replaces] === 'true',
      generation: Number(labels[LABELS.generation]),
      memoryMb: job.memory_mb,
      cpus: job.cpus,
      network: labels[LABELS.network] === 'egress' ? 'egress' : undefined,
    };
  }

  /**
   * Tells the gateway where this Pod's agent serves the session's services. A data disk that refuses the files costs
   * the session its services, not its run.
   */
  async #publishServices(pod: k8s.V1Pod, sessionId: string): Promise<void> {
    const token = pod.metadata?.annotations?.[SERVICES_TOKEN_ANNOTATION];
    const host = pod.status?.podIP;
    if (!token || !host) return;
    await publishServices(this.#dataDir, sessionId, token, { host, port: this.#pods.settings.servicesPort }).catch(
      (err: unknown) =>
        this.#pods.log.warn({ sessionId, err: messageOf(err) }, "could not publish the session Pod's services address"),
    );
  }
}
