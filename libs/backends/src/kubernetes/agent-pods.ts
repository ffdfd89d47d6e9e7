import type * as k8s from '@kubernetes/client-node';
import { SandgateError } from '@sandgate/contracts';
import { AgentChannel } from '../agent/agent-channel.ts';
import { connectWithin } from '../agent/connect.ts';
import type { Death } from '../agent/agent-run.ts';
import type { BackendLogger } from '../logger.ts';
import { clusterError, statusOf, type PodApi } from './api.ts';
import { AGENT_CONTAINER, AGENT_TOKEN_ANNOTATION, type PodSettings } from './pod-spec.ts';
import { viewOf } from './pod-status.ts';

export interface AgentPodTiming {
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
 * Pods whose agent serves runs over TCP (session and pool Pods), as the worker sees them: read, deleted, connected to
 * with the token their annotation holds, and looked at after their connection dropped.
 */
export class AgentPods {
  constructor(
    readonly api: PodApi,
    readonly settings: PodSettings,
    readonly timing: AgentPodTiming,
    readonly log: BackendLogger,
  ) {}

  async read(name: string): Promise<k8s.V1Pod | undefined> {
    return this.api.readPod(name).catch((err: unknown) => {
      if (statusOf(err) === 404) return undefined;
      throw clusterError(err, `reading Pod ${name}`);
    });
  }

  /** Deletes that very Pod (by uid) at once; one already gone is fine. */
  async delete(name: string, uid: string | undefined): Promise<void> {
    await this.api.deletePod(name, uid).catch((err: unknown) => {
      if (statusOf(err) !== 404 && statusOf(err) !== 409) throw clusterError(err, `deleting Pod ${name}`);
    });
  }

  async waitGone(name: string, deadline: number): Promise<void> {
    while ((await this.read(name)) !== undefined) {
      if (Date.now() > deadline) throw new SandgateError('backend_unavailable', `Pod ${name} is still terminating`);
      await sleep(this.timing.pollMs);
    }
  }

  /** Waits for the Pod to run with an IP, then connects to its agent, retrying while the agent starts. */
  async connectWhenRunning(pod: k8s.V1Pod, deadline: number): Promise<{ pod: k8s.V1Pod; channel: AgentChannel }> {
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
        throw new SandgateError('backend_unavailable', `The sandbox Pod ended before it served: ${why}.`);
      }
      if (view.stuck?.hopeless) {
        throw new SandgateError('backend_unavailable', `The sandbox Pod cannot start: ${view.stuck.message}`);
      }
      const ip = current.status?.podIP;
      if (view.phase === 'Running' && ip) {
        const channel = await this.#connect(ip, current, deadline).catch(() => undefined);
        if (channel !== undefined) return { pod: current, channel };
      }
      if (Date.now() > deadline) {
        const why = view.stuck?.message ?? view.unschedulable;
        throw new SandgateError(
          'backend_unavailable',
          `The sandbox Pod did not start within ${this.timing.startupMs} ms${why ? `: ${why}` : ''}.`,
        );
      }
      await sleep(this.timing.pollMs);
      const next = await this.read(name);
      if (next === undefined) throw new Error(`Pod ${name} was deleted while starting`);
      current = next;
    }
  }

  /**
   * How a Pod whose connection dropped mid-run ended; one still running is deleted (in no known state). `emptyDirQuota`
   * words an eviction for an emptyDir other than the workspace (a session's volume), by its name.
   */
  async death(name: string, uid: string, emptyDirQuota?: (emptyDir: string) => string | undefined): Promise<Death> {
    const until = Date.now() + DEATH_WAIT_MS;
    for (;;) {
      const pod = await this.read(name).catch(() => undefined);
      if (pod === undefined || pod.metadata?.uid !== uid) {
        return {
          exitCode: -1,
          oomKilled: false,
          engineStopped: true,
          stoppedBecause: 'The sandbox Pod was deleted during this run (by the cluster or an operator); run it again.',
        };
      }
      const view = viewOf(pod);
      const agent = pod.status?.containerStatuses?.find((c) => c.name === AGENT_CONTAINER)?.state?.terminated;
      if (view.reason === 'Evicted') {
        const emptyDir = /EmptyDir volume "([^"]+)"/.exec(view.message ?? '')?.[1];
        const volume = emptyDir === undefined ? undefined : emptyDirQuota?.(emptyDir);
        if (volume !== undefined) {
          return { exitCode: agent?.exitCode ?? -1, oomKilled: false, engineStopped: false, diskQuota: volume };
        }
        const quota = this.settings.workspaceBytes;
        return {
          exitCode: agent?.exitCode ?? -1,
          oomKilled: false,
          engineStopped: quota <= 0,
          ...(quota > 0
            ? { diskQuota: `The session's files outgrew its disk quota of ${quota} bytes; the sandbox was evicted.` }
            : { stoppedBecause: `The cluster evicted the sandbox Pod: ${view.message ?? 'evicted'}` }),
        };
      }
      if (agent !== undefined) {
        return { exitCode: agent.exitCode, oomKilled: agent.reason === 'OOMKilled', engineStopped: false };
      }
      if (Date.now() > until) {
        this.log.warn({ pod: name }, 'sandbox Pod dropped its connection while running; deleting it');
        await this.delete(name, uid).catch(() => {});
        return { exitCode: -1, oomKilled: false, engineStopped: false };
      }
      await sleep(200);
    }
  }

  /** A connection whose agent has taken the token and answered a ping. */
  async #connect(ip: string, pod: k8s.V1Pod, deadline: number): Promise<AgentChannel> {
    const token = pod.metadata?.annotations?.[AGENT_TOKEN_ANNOTATION];
    if (!token) throw new SandgateError('backend_unavailable', `Pod ${pod.metadata?.name} carries no agent token`);
    return this.connectPort(ip, this.settings.agentPort, token, deadline);
  }

  /**
   * A connection to a server of the Pod at `ip` that speaks the agent's protocol on `port` (the agent, a session Pod's
   * volumes container), once it has taken `token` and answered a ping.
   */
  async connectPort(ip: string, port: number, token: string, deadline: number): Promise<AgentChannel> {
    const timeoutMs = Math.max(1, Math.min(this.timing.handshakeMs, deadline - Date.now()));
    const socket = await connectWithin(ip, port, timeoutMs);
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

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
