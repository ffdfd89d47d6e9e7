import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { DelayedError, Worker, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { QueuedExecution, SessionOpJob } from '@sandgate/contracts';
import type { ExecutionBackend } from '@sandgate/backends';
import {
  DeploymentStats,
  ExecutionStore,
  SessionStore,
  StorageLedger,
  WorkerRegistry,
  createRedis,
  keys,
  queuePrefix,
  redisWarnings,
  withLuaScripts,
  ScriptStore,
} from '@sandgate/state';
import type { Config } from '@sandgate/config';
import type { Workspaces } from '@sandgate/storage';
import { Housekeeping } from './housekeeping.ts';
import { LeaseKeeper } from './lease-keeper.ts';
import { RunExecutor } from './run-executor.ts';
import { SessionOps } from './session-ops.ts';
import { TemplateBuilds } from './template-builds.ts';
import { TemplatePoolSync } from './template-pools.ts';
import { EngineGate } from './engine-gate.ts';
import { WorkerStats } from './worker-stats.ts';

export interface WorkerOptions {
  config: Config;
  log: Logger;
  backend: ExecutionBackend;
  workspaces: Workspaces;
  /** This worker's id (see newWorkerId); the backend labels its warm pool with it. */
  id: string;
  /** How often the worker stamps its heartbeat; default 5 s (/readyz looks back 15 s). */
  heartbeatMs?: number;
}

/** How long a run waits before it is tried again when its tenant already runs SANDGATE_TENANT_MAX_RUNNING. */
export const THROTTLE_DELAY_MS = 250;

export const newWorkerId = () => `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;

export interface RunningWorker {
  readonly id: string;
  /**
   * Stops taking runs and waits for those in flight; past `graceMs` (default SANDGATE_SHUTDOWN_GRACE_S) it stops them,
   * and they end as `error` with reason `shutdown`. Queued runs stay queued for the other workers.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * A BullMQ worker that runs executions through a backend. It keeps nothing another worker could
 * not rebuild: each run it holds carries a lease in Redis; when a worker dies, any other worker's
 * reaper ends the run as `error`/`worker_lost` once the lease lapses and sweeps its sandbox away.
 */
export async function startWorker({
  config,
  log,
  backend,
  workspaces,
  id,
  heartbeatMs = 5000,
}: WorkerOptions): Promise<RunningWorker> {
  const k = keys(config.redisPrefix);
  // A run's commands depend on each other's answers, so auto-pipelining would only add its own cost.
  const redis = withLuaScripts(createRedis(config, 'sandgate-worker', { autoPipelining: false }));
  const subscriber = createRedis(config, 'sandgate-worker-cancel');
  const sessions = new SessionStore(redis, k);
  const executions = new ExecutionStore(redis, k, { retentionSeconds: config.retentionSeconds });
  const registry = new WorkerRegistry(redis, k);
  const deployment = new DeploymentStats(redis, k);
  const ledger = new StorageLedger(redis, k);
  const scripts = new ScriptStore(redis, k);
  const wlog = log.child({ worker: id });
  const stats = new WorkerStats({
    id,
    backend,
    registry,
    stats: deployment,
    concurrency: config.workerConcurrency,
    log: wlog,
    running: (): number => runs.size,
    // The gate is made once the queue worker exists (below), before the first heartbeat.
    takingRuns: (): boolean => gate.takingRuns,
  });
  const leases = new LeaseKeeper({ executions, workerId: id, leaseMs: config.leaseMs });
  leases.start();
  const runs = new RunExecutor({
    config,
    log: wlog,
    backend,
    workspaces,
    workerId: id,
    redis,
    k,
    executions,
    scripts,
    stats,
    leases,
    sessions,
    ledger,
  });
  const ops = new SessionOps({ config, log: wlog, backend, workspaces, redis, k, sessions, ledger });
  for (const warning of await redisWarnings(redis)) wlog.warn(warning);

  await subscriber.subscribe(k.cancelChannel());
  subscriber.on('message', (_channel: string, executionId: string) => runs.cancel(executionId));

  const queueConnection = createRedis(config, 'sandgate-worker-queue', { autoPipelining: false });
  const worker = new Worker<QueuedExecution | SessionOpJob>(
    config.queueName,
    async (job: Job<QueuedExecution | SessionOpJob>, token?: string) => {
      // Pause, resume, fork, snapshot, restore, undo: the gateway holds the session's lock for them (session-ops.ts).
      if (job.name === 'session-op') return ops.run(job.data as SessionOpJob);
      if ((await runs.run(job.data as QueuedExecution, job.timestamp)) !== 'throttled') return;
      // Back into the queue, at the same priority, for when one of the tenant's runs has ended.
      await job.moveToDelayed(Date.now() + THROTTLE_DELAY_MS, token);
      throw new DelayedError();
    },
    {
      connection: queueConnection,
      prefix: queuePrefix(config.redisPrefix),
      concurrency: config.workerConcurrency,
      // Lost runs are ended by our own lease reaper; a stalled job that comes back is skipped by markRunning.
      maxStalledCount: 1,
    },
  );
  const gate = new EngineGate({ id, registry, queue: worker, log: wlog, onChange: (): Promise<void> => stats.stamp() });
  stats.onHealth = (health) => void gate.follow(health.usable);
  worker.on('error', (err) => wlog.error({ err }, 'queue error'));
  worker.on('failed', (job, err) => wlog.error({ err, jobId: job?.id }, 'job failed'));

  const housekeeping = new Housekeeping({
    config,
    log: wlog,
    backend,
    workspaces,
    workerId: id,
    redis,
    executions,
    sessions,
    ledger,
    registry,
    stats,
    runs,
    ops,
    jobKey: (executionId) => worker.toKey(executionId),
  });
  const templatePools = new TemplatePoolSync({ config, log: wlog, backend, redis, k });
  await templatePools.start();
  const builds = new TemplateBuilds({ config, log: wlog, backend, redis, k, workerId: id });
  await builds.start();
  const beat = () => void stats.beat().catch((err: unknown) => wlog.warn({ err }, 'heartbeat failed'));
  beat();
  housekeeping.start();
  const heartbeat = setInterval(beat, heartbeatMs);
  await worker.waitUntilReady();
  wlog.info({ concurrency: config.workerConcurrency, backend: backend.name }, 'worker ready');

  return {
    id,
    async close(graceMs = config.shutdownGraceMs) {
      clearInterval(heartbeat);
      const housekept = housekeeping.close();
      templatePools.close();
      const building = builds.close();
      const closing = worker.close();
      const grace = setTimeout(() => runs.stopAll(graceMs), graceMs);
      await closing;
      await building;
      clearTimeout(grace);
      leases.close();
      await housekept;
      await stats.stop();
      await registry.leave(id).catch(() => {});
      subscriber.disconnect();
      queueConnection.disconnect();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
