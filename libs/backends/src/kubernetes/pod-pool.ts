import { randomBytes } from 'node:crypto';
import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import { runPooled, type PooledRunContext } from '../pool/pooled-run.ts';
import { SandboxPool, type PoolMember } from '../pool/sandbox-pool.ts';
import { clusterError } from './api.ts';
import type { AgentPods } from './agent-pods.ts';
import { poolPod } from './pod-spec.ts';
import { pullFiles, pushFiles, type Baseline } from './session-files.ts';

/** A warm Pod of this worker's pool, connected to its agent. */
export interface PooledPod extends PoolMember {
  uid: string;
  /** The memory and CPUs it was made with: the pool's, or a run's that asked for others (then it serves that one). */
  limits: { memory_mb: number; cpus: number };
}

export interface PodPoolOptions {
  pods: AgentPods;
  /** This worker's id (label org.sandgate.instance): sweep removes the pool Pods of workers that are gone. */
  instanceId: string;
  size: number;
  /** Memory and CPUs every pool Pod is made with; a one-shot that asks for others gets a Pod of its own. */
  limits: { memory_mb: number; cpus: number };
  maxRuns: number;
  maxRecycled: number;
  recycledIdleMs: number;
  /** A template's pool: its name and image; absent: the runtime image's. */
  template?: { name: string; image: string };
}

/**
 * The Kubernetes backend's warm pool: Pods running the agent, started ahead so a one-shot skips the Pod start. Made,
 * reset and reused for one tenant exactly as the Docker backend's pool sandboxes are (SandboxPool); the files of a
 * run move in and out through the worker, as in a session Pod.
 */
export class PodPool extends SandboxPool<PooledPod> {
  readonly limits: { memory_mb: number; cpus: number };

  constructor(o: PodPoolOptions) {
    const { pods } = o;
    super({
      size: o.size,
      log: pods.log,
      maxRuns: o.maxRuns,
      maxRecycled: o.maxRecycled,
      recycledIdleMs: o.recycledIdleMs,
      make: async (closed, want) => {
        const limits = want ?? o.limits;
        const name = `sandgate-p-${randomBytes(8).toString('hex')}`;
        const token = randomBytes(32).toString('base64url');
        const made = await pods.api
          .createPod(poolPod(name, o.instanceId, limits, pods.settings, token, o.template))
          .catch((err: unknown) => {
            throw clusterError(err, 'creating a pool Pod');
          });
        const uid = made.metadata!.uid!;
        try {
          const { channel } = await pods.connectWhenRunning(made, Date.now() + pods.timing.startupMs);
          if (closed()) {
            channel.close();
            await pods.delete(name, uid);
            return undefined;
          }
          return { name, uid, channel, runs: 0, tenant: undefined, limits };
        } catch (err) {
          await pods.delete(name, uid).catch(() => {});
          throw err;
        }
      },
      discard: (pod) => pods.delete(pod.name, pod.uid),
    });
    this.limits = o.limits;
  }

  /** Whether a job can run in a pool Pod: one made with exactly its memory and CPUs. */
  fits(job: Pick<ExecutionJob, 'memory_mb' | 'cpus'>): boolean {
    return job.memory_mb === this.limits.memory_mb && job.cpus === this.limits.cpus;
  }
}

export interface PooledPodRunContext extends PooledRunContext {
  pool: PodPool;
  pods: AgentPods;
  maxFileBytes: number;
}

/**
 * Runs a one-shot in a warm Pod (runPooled): the session's files go in and come back through the worker, and a
 * proved reset empties the Pod's workspace too. Undefined when the Pod could not be used before the code started:
 * the caller then makes a Pod for the run.
 */
export function runPooledPod(
  ctx: PooledPodRunContext,
  sandbox: PooledPod,
  job: ExecutionJob,
  dir: string,
  events: EventSink,
  signal: AbortSignal,
): Promise<ExecutionResult | undefined> {
  let baseline: Baseline = new Map();
  return runPooled(
    ctx.pool,
    sandbox,
    ctx,
    {
      prepare: async () => {
        ({ baseline } = await pushFiles(sandbox.channel, dir, ctx.log));
      },
      fallBack: () => {},
      kill: () => ctx.pods.delete(sandbox.name, sandbox.uid),
      death: () => ctx.pods.death(sandbox.name, sandbox.uid),
      collect: () => pullFiles(sandbox.channel, baseline, dir, ctx.maxFileBytes, ctx.log, job.session_id),
      // A Pod made with a run's own limits serves that run only: the pool's Pods all have the pool's.
      handBack: async () => ctx.pool.fits({ memory_mb: sandbox.limits.memory_mb, cpus: sandbox.limits.cpus }),
    },
    { job, dir, events, signal },
  );
}
