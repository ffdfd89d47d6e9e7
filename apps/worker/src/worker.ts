import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { DelayedError, Worker, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { SandgateError, type ExecutionResult, type QueuedExecution } from '@sandgate/contracts';
import type { ExecutionBackend } from '@sandgate/backends';
import {
  DeploymentStats,
  EventWriter,
  ExecutionStore,
  SessionStore,
  StorageLedger,
  WORKER_ALIVE_MS,
  WorkerRegistry,
  createRedis,
  keys,
  platformResult,
  redisWarnings,
  withScripts,
  ScriptStore,
} from '@sandgate/state';
import { limitsFor, type Config } from '@sandgate/config';
import type { Workspaces } from '@sandgate/storage';
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

/** The abort reason of runs stopped because their worker shuts down (a cancel aborts without one). */
const SHUTDOWN = Symbol('shutdown');

/** What a run stopped by its worker's shutdown reports: its output so far, and why it ended. */
function shutdownResult(result: ExecutionResult, graceMs: number): ExecutionResult {
  return {
    ...result,
    state: 'error',
    reason: 'shutdown',
    artifacts: [],
    message: `the worker shut down and the run did not finish within its grace period of ${graceMs / 1000} s`,
  };
}

/**
 * A BullMQ worker that runs executions through a backend. It keeps nothing another worker could
 * not rebuild: each run it holds carries a lease in Redis; when a worker dies, any other worker's
 * reaper ends the run as `error`/`worker_lost` once the lease lapses and sweeps its sandbox away.
 */
/** How long the code of a completed run is kept so that POST /v1/scripts can save it by execution id. */
export const RUN_CODE_TTL_S = 3600;

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
  const redis = withScripts(createRedis(config.redisUrl, 'sandgate-worker', { autoPipelining: false }));
  const subscriber = createRedis(config.redisUrl, 'sandgate-worker-cancel');
  const sessions = new SessionStore(redis, k);
  const executions = new ExecutionStore(redis, k, { retentionSeconds: config.retentionSeconds });
  const registry = new WorkerRegistry(redis, k);
  const deployment = new DeploymentStats(redis, k);
  const ledger = new StorageLedger(redis, k);
  const scripts = new ScriptStore(redis, k);
  const inFlight = new Map<string, AbortController>();
  let graceUsed = config.shutdownGraceMs;
  const wlog = log.child({ worker: id });
  const stats = new WorkerStats({
    id,
    backend,
    registry,
    stats: deployment,
    concurrency: config.workerConcurrency,
    log: wlog,
    running: () => inFlight.size,
  });
  for (const warning of await redisWarnings(redis)) wlog.warn(warning);

  await subscriber.subscribe(k.cancelChannel());
  subscriber.on('message', (_channel: string, executionId: string) => inFlight.get(executionId)?.abort());

  /** Runs one queued execution to its end; `throttled` when its tenant runs its maximum already (it stays queued). */
  const run = async (queued: QueuedExecution, queuedAt: number): Promise<'throttled' | void> => {
    // Every line about a run carries its ids and tenant, so `execution_id` finds them all across processes.
    let jlog = wlog.child({ execution_id: queued.execution_id, tenant: queued.tenant });
    const ac = new AbortController();
    inFlight.set(queued.execution_id, ac);
    try {
      const maxRunning = limitsFor(config, queued.tenant).max_running;
      const started = await executions.markRunning(queued.execution_id, queued.tenant, id, config.leaseMs, maxRunning);
      if (started.state === 'throttled') return 'throttled';
      if (started.state === 'not_queued') {
        jlog.info('execution no longer queued (cancelled or reaped); skipping');
        return;
      }
      const { job } = started;
      jlog = jlog.child({ session_id: job.session_id });
      deployment.queueWait(Date.now() - queuedAt).catch(() => {});
      // The cancel was published before this run was in `inFlight`: the backend sees it through the signal.
      if (started.state === 'cancel_requested') ac.abort();
      const lease = setInterval(
        () => {
          executions
            .renewLease(job.execution_id, id, config.leaseMs)
            .catch((err: unknown) => jlog.warn({ err }, 'lease renewal failed'));
        },
        Math.floor(config.leaseMs / 3),
      );
      const events = new EventWriter(redis, k.events(job.execution_id));
      let result: ExecutionResult;
      try {
        jlog.info({ language: job.language }, 'execution started');
        result = await backend.execute(job, events, ac.signal, jlog);
      } catch (err) {
        jlog.error({ err }, 'execution failed in the platform');
        const reason =
          err instanceof SandgateError && err.code === 'backend_unavailable' ? 'backend_unavailable' : undefined;
        if (reason) stats.engineErrors++;
        result = platformResult(
          'error',
          reason,
          err instanceof SandgateError ? err.message : 'the sandbox backend failed; see the worker log',
        );
      } finally {
        clearInterval(lease);
      }
      if (ac.signal.reason === SHUTDOWN) result = shutdownResult(result, graceUsed);
      // What the run wrote counts against its tenant's storage quota, before anyone learns that it ended.
      await ledger
        .record(job.tenant, job.session_id, await workspaces.usedBytes(job.session_id))
        .catch((err: unknown) => jlog.warn({ err }, "could not record the session's storage"));
      // What the backend reported and is not sent yet goes out with the result, in one step.
      await Promise.all([
        executions.finalize(
          { id: job.execution_id, session_id: job.session_id, tenant: job.tenant, language: job.language },
          result,
          ['running'],
          events.takePending(),
        ),
        events.flush().catch((err: unknown) => jlog.warn({ err }, 'some events could not be written')),
      ]);
      if (result.state === 'completed' && job.keep_code === true) {
        // Asked for (keep_code): the code of a run that succeeded stays an hour, to be saved as a script; env and
        // stdin are gone with the run as always.
        await scripts
          .keepRunCode(job.execution_id, job.language, job.code, RUN_CODE_TTL_S)
          .catch((err: unknown) => jlog.warn({ err }, "could not keep the run's code for saving"));
      }
      jlog.info({ state: result.state, exitCode: result.exit_code, ms: result.duration_ms }, 'execution finished');
    } finally {
      inFlight.delete(queued.execution_id);
    }
  };

  const queueConnection = createRedis(config.redisUrl, 'sandgate-worker-queue', { autoPipelining: false });
  const worker = new Worker<QueuedExecution>(
    config.queueName,
    async (job: Job<QueuedExecution>, token?: string) => {
      if ((await run(job.data, job.timestamp)) !== 'throttled') return;
      // Back into the queue, at the same priority, for when one of the tenant's runs has ended.
      await job.moveToDelayed(Date.now() + THROTTLE_DELAY_MS, token);
      throw new DelayedError();
    },
    {
      connection: queueConnection,
      prefix: `${config.redisPrefix}:q`,
      concurrency: config.workerConcurrency,
      // Lost runs are ended by our own lease reaper; a stalled job that comes back is skipped by markRunning.
      maxStalledCount: 1,
    },
  );
  worker.on('error', (err) => wlog.error({ err }, 'queue error'));
  worker.on('failed', (job, err) => wlog.error({ err, jobId: job?.id }, 'job failed'));

  /**
   * Ends runs recorded but never enqueued (their gateway stopped in between, or Redis lost the job): after a grace of
   * three leases, a queued run with no job would otherwise hold its session's lock until the lock's 24 h expire.
   */
  const endStranded = async () => {
    for (const stranded of await executions.queuedBefore(Date.now() - 3 * config.leaseMs)) {
      if ((await redis.exists(worker.toKey(stranded))) === 1) continue;
      const rec = await executions.get(stranded);
      if (!rec) continue;
      const result = platformResult(
        'error',
        'backend_unavailable',
        'the execution was recorded but never queued; it did not run',
      );
      if (await executions.finalize(rec, result, ['queued'])) {
        wlog.warn({ executionId: stranded }, 'execution ended: it was never queued');
      }
    }
  };

  /**
   * Ends runs whose worker died or that were never queued,
   * removes every sandbox no live run owns, then expired sessions.
   */
  const housekeeping = async () => {
    await endStranded();
    const { live, lost: lostRuns } = await executions.leases();
    for (const lost of lostRuns) {
      // Ours, and alive: its lease lapsed while Redis was away (renewals failed), not because we stopped.
      if (inFlight.has(lost)) {
        await executions.renewLease(lost, id, config.leaseMs);
        continue;
      }
      const rec = await executions.get(lost);
      if (!rec) continue;
      const ended = await executions.finalize(
        rec,
        platformResult('error', 'worker_lost', 'the worker running this execution stopped'),
        ['running'],
      );
      if (ended) {
        const ids = { execution_id: lost, session_id: rec.session_id, tenant: rec.tenant };
        wlog.warn(ids, 'execution ended: its worker was lost');
      }
    }
    for (const idInFlight of inFlight.keys()) live.add(idInFlight);
    const workers = await registry.aliveIds(WORKER_ALIVE_MS);
    workers.add(id);
    const { removed } = await backend.sweep({ executions: live, sessions: await sessions.liveIds(), workers });
    if (removed.length > 0) wlog.info({ removed }, 'removed orphaned sandboxes');
    for (const s of await sessions.expired()) {
      if (s.tenant === null) await sessions.forget(s.id);
      else if (!(await sessions.delete({ id: s.id, tenant: s.tenant }, false))) continue;
      await workspaces.remove(s.id);
      if (s.tenant !== null) await ledger.forget(s.tenant, s.id);
      wlog.info({ sessionId: s.id }, 'expired session removed');
    }
  };
  let housekeepingRun: Promise<void> = Promise.resolve();
  const tick = () => {
    housekeepingRun = housekeeping().catch((err: unknown) => {
      if (err instanceof SandgateError && err.code === 'backend_unavailable') stats.engineErrors++;
      wlog.error({ err }, 'housekeeping failed');
    });
  };
  const beat = () => void stats.beat().catch((err: unknown) => wlog.warn({ err }, 'heartbeat failed'));
  beat();
  tick();
  const timers = [setInterval(beat, heartbeatMs), setInterval(tick, config.sweepIntervalMs)];
  await worker.waitUntilReady();
  wlog.info({ concurrency: config.workerConcurrency, backend: backend.name }, 'worker ready');

  return {
    id,
    async close(graceMs = config.shutdownGraceMs) {
      graceUsed = graceMs;
      timers.forEach(clearInterval);
      const closing = worker.close();
      const grace = setTimeout(() => {
        for (const ac of inFlight.values()) ac.abort(SHUTDOWN);
      }, graceMs);
      await closing;
      clearTimeout(grace);
      await housekeepingRun;
      await stats.stop();
      await registry.leave(id).catch(() => {});
      subscriber.disconnect();
      queueConnection.disconnect();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
