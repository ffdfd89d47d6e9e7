import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import type * as k8s from '@kubernetes/client-node';
import { SandgateError, type ExecutionJob } from '@sandgate/contracts';
import { AgentChannel } from '../shared/agent-channel.ts';
import type { Death } from '../shared/agent-run.ts';
import { AttachCache } from '../shared/attach-cache.ts';
import { deploymentOf, LABELS } from '../shared/labels.ts';
import type { BackendLogger } from '../shared/logger.ts';
import type { HeldSandbox, SessionHost } from '../shared/session-run.ts';
import { clusterError, messageOf, statusOf, type PodApi } from './api.ts';
import { AGENT_CONTAINER, AGENT_TOKEN_ANNOTATION, sessionPod, sessionPodName, type PodSettings } from './pod-spec.ts';
import { viewOf } from './pod-status.ts';
import { pullFiles, pushFiles, type Baseline } from './session-files.ts';

/** A session's Pod, connected for one run. */
export interface SessionPod extends HeldSandbox {
  sessionId: string;
  name: string;
  uid: string;
  generation: number;
  memoryMb: number;
  cpus: number;
  /** The files as the current run began (set by prepare). */
  baseline?: Baseline;
}

export interface SessionPodTiming {
  /** How long a new Pod may take to run its agent (scheduling, image pulls, start) before the run fails. */
  startupMs: number;
  /** Between two looks at a Pod that is starting. */
  pollMs: number;
  /** A running agent answers a ping at once; this much covers a busy node and network. */
  handshakeMs: number;
}

/** How long the cluster has to report how a Pod that dropped its connection ended. */
const DEATH_WAIT_MS = 5_000;

/**
 * Finds, makes and replaces sessions' long-lived Pods, exec-free: the worker reaches each Pod's agent over TCP at the
 * Pod IP, with a per-Pod token (see sessionPod). Stateless across worker replicas: a session's Pod is found by its
 * deterministic name and its token read from the Pod itself. A connection is kept between runs of a session, so a
 * run on a live session costs one API call (a look at its Pod) and no new connection.
 */
export class SessionPods implements SessionHost<SessionPod> {
  readonly #kept = new AttachCache<SessionPod>();

  constructor(
    private readonly api: PodApi,
    private readonly settings: PodSettings,
    private readonly timing: SessionPodTiming,
    private readonly log: BackendLogger,
    private readonly maxFileBytes: number,
  ) {}

  async acquire(job: ExecutionJob): Promise<SessionPod> {
    const name = sessionPodName(job.session_id);
    const kept = this.#kept.take(job.session_id);
    // A kept connection is used only while its Pod is still the session's, running and not being deleted: a Pod
    // being deleted lets its agent serve on for a moment (the grace period), and would take a run it cannot finish.
    if (kept !== undefined && this.#fits(kept, job)) {
      const pod = await this.#read(name).catch(() => undefined);
      if (pod?.metadata?.uid === kept.uid && !pod.metadata.deletionTimestamp && pod.status?.phase === 'Running') {
        return kept;
      }
    }
    kept?.channel.close();
    let replaces = kept !== undefined;
    const deadline = Date.now() + this.timing.startupMs;
    for (;;) {
      const pod = await this.#read(name);
      if (pod === undefined) {
        const made = await this.#create(job, replaces);
        if (made !== undefined) return this.#connectWhenRunning(made, job, deadline);
        continue; // another worker made it meanwhile, or the old one is still going: look again
      }
      const labels = pod.metadata?.labels ?? {};
      if (deploymentOf(labels) !== this.settings.deployment || labels[LABELS.session] !== job.session_id) {
        throw new SandgateError('backend_unavailable', `Pod ${name} belongs to another sandgate deployment`);
      }
      if (pod.metadata?.deletionTimestamp !== undefined) {
        replaces = true;
        await this.#waitGone(name, deadline);
        continue;
      }
      const view = viewOf(pod);
      const stale =
        Number(labels[LABELS.generation]) < job.generation ||
        !sameLimits(pod, job) ||
        view.phase === 'Failed' ||
        view.phase === 'Succeeded';
      if (!stale) {
        const found = await this.#connectWhenRunning(pod, job, deadline).catch((err: unknown) => {
          this.log.warn(
            { sessionId: job.session_id, err: messageOf(err) },
            'session Pod does not answer; replacing it',
          );
          return undefined;
        });
        if (found !== undefined) return found;
      } else {
        this.log.info({ sessionId: job.session_id, phase: view.phase }, 'replacing session Pod');
      }
      replaces = true;
      await this.#delete(name, pod.metadata?.uid);
    }
  }

  release(sandbox: SessionPod): void {
    this.#kept.put(sandbox.sessionId, sandbox);
  }

  async kill(sandbox: SessionPod): Promise<void> {
    await this.#delete(sandbox.name, sandbox.uid);
  }

  async death(sandbox: SessionPod, job: ExecutionJob): Promise<Death> {
    const until = Date.now() + DEATH_WAIT_MS;
    for (;;) {
      const pod = await this.#read(sandbox.name).catch(() => undefined);
      if (pod === undefined || pod.metadata?.uid !== sandbox.uid) {
        return {
          exitCode: -1,
          oomKilled: false,
          engineStopped: true,
          stoppedBecause:
            "The session's Pod was deleted during this run (by the cluster or an operator); run it again.",
        };
      }
      const view = viewOf(pod);
      const agent = pod.status?.containerStatuses?.find((c) => c.name === AGENT_CONTAINER)?.state?.terminated;
      if (view.reason === 'Evicted') {
        const quota = this.settings.workspaceBytes;
        return {
          exitCode: agent?.exitCode ?? -1,
          oomKilled: false,
          engineStopped: quota <= 0,
          ...(quota > 0
            ? { diskQuota: `The session's files outgrew its disk quota of ${quota} bytes; the sandbox was evicted.` }
            : { stoppedBecause: `The cluster evicted the session's Pod: ${view.message ?? 'evicted'}` }),
        };
      }
      if (agent !== undefined) {
        return { exitCode: agent.exitCode, oomKilled: agent.reason === 'OOMKilled', engineStopped: false };
      }
      if (Date.now() > until) {
        // Running, yet the connection dropped: in no known state. It goes; the next run makes a fresh one.
        this.log.warn({ sessionId: job.session_id, pod: sandbox.name }, 'session Pod dropped its connection');
        await this.kill(sandbox).catch(() => {});
        return { exitCode: -1, oomKilled: false, engineStopped: false };
      }
      await sleep(200);
    }
  }

  failure(err: unknown): Error {
    return err instanceof SandgateError ? err : clusterError(err, 'starting the session Pod');
  }

  async prepare(sandbox: SessionPod, _job: ExecutionJob, dir: string): Promise<void> {
    sandbox.baseline = await pushFiles(sandbox.channel, dir, this.log);
  }

  async collect(sandbox: SessionPod, job: ExecutionJob, dir: string): Promise<void> {
    const baseline = sandbox.baseline ?? new Map();
    sandbox.baseline = undefined;
    await pullFiles(sandbox.channel, baseline, dir, this.maxFileBytes, this.log, job.session_id);
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

  async #read(name: string): Promise<k8s.V1Pod | undefined> {
    return this.api.readPod(name).catch((err: unknown) => {
      if (statusOf(err) === 404) return undefined;
      throw clusterError(err, 'reading the session Pod');
    });
  }

  /** Creates the session's Pod; undefined when one by that name exists (made by another worker, or still going). */
  async #create(job: ExecutionJob, replaces: boolean): Promise<k8s.V1Pod | undefined> {
    const token = randomBytes(32).toString('base64url');
    try {
      return await this.api.createPod(sessionPod(job, this.settings, { token, replaces }));
    } catch (err) {
      if (statusOf(err) === 409) return undefined;
      throw clusterError(err, 'creating the session Pod');
    }
  }

  async #delete(name: string, uid: string | undefined): Promise<void> {
    await this.api.deletePod(name, uid).catch((err: unknown) => {
      if (statusOf(err) !== 404 && statusOf(err) !== 409) throw clusterError(err, 'deleting the session Pod');
    });
  }

  async #waitGone(name: string, deadline: number): Promise<void> {
    while ((await this.#read(name)) !== undefined) {
      if (Date.now() > deadline) throw new SandgateError('backend_unavailable', `Pod ${name} is still terminating`);
      await sleep(this.timing.pollMs);
    }
  }

  /** Waits for the Pod to run with an IP, then connects to its agent, retrying while the agent starts. */
  async #connectWhenRunning(pod: k8s.V1Pod, job: ExecutionJob, deadline: number): Promise<SessionPod> {
    const name = pod.metadata!.name!;
    const uid = pod.metadata!.uid!;
    let current = pod;
    for (;;) {
      const view = viewOf(current);
      if (current.metadata?.uid !== uid) throw new Error(`Pod ${name} was replaced meanwhile`);
      if (view.phase === 'Failed' || view.phase === 'Succeeded') {
        const agent = current.status?.containerStatuses?.find((c) => c.name === AGENT_CONTAINER)?.state?.terminated;
        const why = agent
          ? `its agent exited with status ${agent.exitCode}${agent.reason ? ` (${agent.reason})` : ''}` +
            `${agent.message ? `: ${agent.message.trim().slice(-500)}` : ''}`
          : (view.message ?? view.phase);
        throw new SandgateError('backend_unavailable', `The session Pod ended before it served: ${why}.`);
      }
      if (view.stuck?.hopeless) {
        throw new SandgateError('backend_unavailable', `the session Pod cannot start: ${view.stuck.message}`);
      }
      const ip = current.status?.podIP;
      if (view.phase === 'Running' && ip) {
        const channel = await this.#connect(ip, current, deadline).catch(() => undefined);
        if (channel !== undefined) {
          const labels = current.metadata?.labels ?? {};
          return {
            sessionId: job.session_id,
            name,
            uid,
            channel,
            replaces: labels[LABELS.replaces] === 'true',
            generation: Number(labels[LABELS.generation]),
            memoryMb: job.memory_mb,
            cpus: job.cpus,
          };
        }
      }
      if (Date.now() > deadline) {
        const why = view.stuck?.message ?? view.unschedulable;
        throw new SandgateError(
          'backend_unavailable',
          `The session Pod did not start within ${this.timing.startupMs} ms${why ? `: ${why}` : ''}.`,
        );
      }
      await sleep(this.timing.pollMs);
      const next = await this.#read(name);
      if (next === undefined) throw new Error(`Pod ${name} was deleted while starting`);
      current = next;
    }
  }

  /** A connection whose agent has taken the token and answered a ping. */
  async #connect(ip: string, pod: k8s.V1Pod, deadline: number): Promise<AgentChannel> {
    const token = pod.metadata?.annotations?.[AGENT_TOKEN_ANNOTATION];
    if (!token) throw new SandgateError('backend_unavailable', `Pod ${pod.metadata?.name} carries no agent token`);
    const socket = await open(
      ip,
      this.settings.agentPort,
      Math.max(1, Math.min(this.timing.handshakeMs, deadline - Date.now())),
    );
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 10_000);
    const channel = new AgentChannel(socket);
    channel.sendRaw(`${JSON.stringify({ op: 'hello', token })}\n`);
    try {
      await channel.handshake(this.timing.handshakeMs);
      return channel;
    } catch (err) {
      channel.close();
      throw err;
    }
  }
}

function open(host: string, port: number, timeoutMs: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no connection to ${host}:${port} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    });
  });
}

/** The Pod was made with the job's memory and CPUs (a running Pod's resources cannot be changed here). */
function sameLimits(pod: k8s.V1Pod, job: ExecutionJob): boolean {
  const limits = pod.spec?.containers.find((c) => c.name === AGENT_CONTAINER)?.resources?.limits ?? {};
  return limits.memory === `${job.memory_mb}Mi` && limits.cpu === String(job.cpus);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
