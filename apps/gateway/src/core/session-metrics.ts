import { NoSandbox, ServiceAgents, type AgentMetrics } from '@sandgate/backends/services';
import { SandgateError, type SessionMetrics } from '@sandgate/contracts';
import type { SessionRecord } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';
import { sandboxUnreachable } from './service-manager.ts';

/** How often a stream samples, and so how often its events come. */
export const STREAM_INTERVAL_MS = 1000;
/** A single read without a recent sample of the session takes two, this far apart, to measure CPU. */
const CPU_WINDOW_MS = 250;
/** A previous sample older than this is not used for CPU: the figure would be an average over too long. */
const PREVIOUS_MAX_AGE_MS = 5000;
/** Retry-After of too_many_metric_streams: only a stream that closes frees a slot. */
const TOO_MANY_RETRY_S = 10;

/** One stream's next item: a sample, or the end of the session. */
export type MetricsTick = { metrics: SessionMetrics } | { deleted: true };

interface Previous {
  sample: AgentMetrics;
  /** When it was taken, on this process's clock. */
  at: number;
}

/**
 * Live figures of sessions (docs/metrics.md): CPU, memory and processes from the sandbox's own cgroup, read by the
 * sandbox agent and reached as terminals are (the agent's services socket on Docker, its services port on Kubernetes);
 * disk from the session's directory and its quota. A stream samples each session once per interval in this process,
 * however many clients watch it, and only while one does.
 */
export class SessionMetricsReader {
  readonly #d: GatewayDeps;
  readonly #agents: ServiceAgents;
  readonly #previous = new Map<string, Previous>();
  readonly #samplers = new Map<string, Sampler>();
  readonly #perTenant = new Map<string, number>();
  readonly #perSession = new Map<string, number>();

  constructor(d: GatewayDeps) {
    this.#d = d;
    this.#agents = new ServiceAgents(d.config.dataDir);
  }

  /** The session's figures now; a session of another tenant is not found. */
  async read(tenant: string, sessionId: string): Promise<SessionMetrics> {
    const session = await this.#d.sessions.require(tenant, sessionId);
    const previous = this.#previous.get(session.id);
    if (previous === undefined || Date.now() - previous.at > PREVIOUS_MAX_AGE_MS) {
      // No recent sample to measure CPU against: take one now and measure over a short window.
      if ((await this.#sample(session)).sandbox) await delay(CPU_WINDOW_MS);
    }
    const metrics = await this.#sample(session);
    if (!this.#samplers.has(session.id)) this.#previous.delete(session.id);
    return metrics;
  }

  /**
   * A stream of the session's figures, one per interval, until the session is deleted or `signal` aborts; refused
   * (too_many_metric_streams) past the session's or the tenant's number of streams in this gateway.
   */
  async open(tenant: string, sessionId: string): Promise<{ next(): Promise<MetricsTick>; close(): void }> {
    const session = await this.#d.sessions.require(tenant, sessionId);
    const { maxMetricStreamsPerSession: perSession, maxMetricStreamsPerTenant: perTenant } = this.#d.config;
    const ofSession = this.#perSession.get(session.id) ?? 0;
    const ofTenant = this.#perTenant.get(tenant) ?? 0;
    if (ofSession >= perSession || ofTenant >= perTenant) {
      const which =
        ofSession >= perSession
          ? `session ${session.id} has ${ofSession} metric streams open (SANDGATE_MAX_METRIC_STREAMS_PER_SESSION)`
          : `the tenant has ${ofTenant} metric streams open (SANDGATE_MAX_METRIC_STREAMS_PER_TENANT)`;
      throw new SandgateError('too_many_metric_streams', `${which}; close one first`, {
        extra: { retry_after: TOO_MANY_RETRY_S },
      });
    }
    this.#perSession.set(session.id, ofSession + 1);
    this.#perTenant.set(tenant, ofTenant + 1);
    let sampler = this.#samplers.get(session.id);
    if (sampler === undefined) {
      sampler = new Sampler(() => this.#tick(session));
      this.#samplers.set(session.id, sampler);
    }
    const mine = sampler;
    mine.refs += 1;
    let closed = false;
    return {
      next: () => mine.next(),
      close: () => {
        if (closed) return;
        closed = true;
        decrement(this.#perSession, session.id);
        decrement(this.#perTenant, tenant);
        mine.refs -= 1;
        if (mine.refs === 0) {
          mine.stop();
          this.#samplers.delete(session.id);
          this.#previous.delete(session.id);
        }
      },
    };
  }

  async #tick(session: SessionRecord): Promise<MetricsTick> {
    const now = await this.#d.sessions.get(session.tenant, session.id);
    if (now === null) return { deleted: true };
    return { metrics: await this.#sample(now) };
  }

  /** One sample: the sandbox's figures when it has a sandbox the agent answers for, the disk's in any case. */
  async #sample(session: SessionRecord): Promise<SessionMetrics> {
    const [agent, disk] = await Promise.all([this.#agentSample(session), this.#disk(session.id)]);
    const at = Date.now();
    const state = session.currentExecutionId ? 'busy' : session.pausedAt !== null ? 'paused' : 'idle';
    const base = { session_id: session.id, state, sampled_at: new Date(at).toISOString(), ...disk } as const;
    if (agent === null) {
      this.#previous.delete(session.id);
      return { ...base, sandbox: false, cpu_percent: null, memory_bytes: null, memory_limit_bytes: null, pids: null };
    }
    const previous = this.#previous.get(session.id);
    this.#previous.set(session.id, { sample: agent, at });
    return {
      ...base,
      sandbox: true,
      cpu_percent: cpuPercent(previous?.sample, agent),
      memory_bytes: agent.memory_bytes,
      memory_limit_bytes: agent.memory_limit_bytes,
      pids: agent.pids,
    };
  }

  async #agentSample(session: SessionRecord): Promise<AgentMetrics | null> {
    if (session.pausedAt !== null) return null;
    try {
      return await this.#agents.metrics(session.id);
    } catch (err) {
      if (err instanceof NoSandbox) return null;
      throw sandboxUnreachable(err);
    }
  }

  async #disk(sessionId: string): Promise<{ disk_bytes: number; disk_limit_bytes: number | null }> {
    const { workspaces, config } = this.#d;
    const used = await workspaces.usedBytes(sessionId).catch(() => 0);
    const limited = workspaces.quota !== undefined && config.sessionDiskBytes > 0;
    return { disk_bytes: used, disk_limit_bytes: limited ? config.sessionDiskBytes : null };
  }
}

/** CPU between two samples of one sandbox, in percent of one core; null without a previous one of the same sandbox. */
function cpuPercent(before: AgentMetrics | undefined, after: AgentMetrics): number | null {
  if (before === undefined || before.cpu_usage_ns === null || after.cpu_usage_ns === null) return null;
  const used = after.cpu_usage_ns - before.cpu_usage_ns;
  const elapsed = after.monotonic_ns - before.monotonic_ns;
  // A new sandbox (a restart, a resume) starts its counter and its clock afresh: no figure across two sandboxes.
  if (used < 0 || elapsed <= 0) return null;
  return Math.round((used / elapsed) * 1000) / 10;
}

/** Samples one session every interval while streams hold it, and hands each sample to every stream waiting. */
class Sampler {
  refs = 0;
  #waiting: ((tick: MetricsTick) => void)[] = [];
  #failed: ((err: unknown) => void)[] = [];
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(readonly take: () => Promise<MetricsTick>) {
    this.#schedule(0);
  }

  next(): Promise<MetricsTick> {
    return new Promise((resolve, reject) => {
      this.#waiting.push(resolve);
      this.#failed.push(reject);
    });
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#run(), ms);
  }

  async #run(): Promise<void> {
    const started = Date.now();
    const waiting = this.#waiting;
    const failed = this.#failed;
    this.#waiting = [];
    this.#failed = [];
    try {
      const tick = await this.take();
      for (const resolve of waiting) resolve(tick);
    } catch (err) {
      for (const reject of failed) reject(err);
    }
    this.#schedule(Math.max(0, STREAM_INTERVAL_MS - (Date.now() - started)));
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const n = (counts.get(key) ?? 1) - 1;
  if (n <= 0) counts.delete(key);
  else counts.set(key, n);
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
