import type { Logger } from 'pino';
import { SandgateError } from '@sandgate/contracts';
import type { ExecutionBackend } from '@sandgate/backends';
import {
  WORKER_ALIVE_MS,
  platformResult,
  streamedParts,
  type ExecutionStore,
  type LuaRedis,
  type SessionStore,
  type StorageLedger,
  type WorkerRegistry,
} from '@sandgate/state';
import type { Config } from '@sandgate/config';
import type { Workspaces } from '@sandgate/storage';
import type { RunExecutor } from './run-executor.ts';
import type { SessionOps } from './session-ops.ts';
import type { WorkerStats } from './worker-stats.ts';

export interface HousekeepingOptions {
  config: Config;
  log: Logger;
  backend: ExecutionBackend;
  workspaces: Workspaces;
  workerId: string;
  redis: LuaRedis;
  executions: ExecutionStore;
  sessions: SessionStore;
  ledger: StorageLedger;
  registry: WorkerRegistry;
  stats: WorkerStats;
  /** The runs this worker holds: their leases and sandboxes are alive whatever Redis says. */
  runs: RunExecutor;
  /** Pauses sessions left idle past their time. */
  ops: SessionOps;
  /** The Redis key of the queue's job of an execution (BullMQ's Worker.toKey). */
  jobKey: (executionId: string) => string;
}

/**
 * What every worker does every SANDGATE_SWEEP_INTERVAL_MS, whichever worker gets there first: ends runs whose worker
 * died or that were never queued, pauses sessions idle past their time (each under its lock, so never during a run),
 * removes every sandbox no live run or session owns, then sessions past their retention. Nothing here is a worker's
 * own: any worker may do it for all.
 */
export class Housekeeping {
  #timer: NodeJS.Timeout | undefined;
  #pass: Promise<void> = Promise.resolve();

  readonly #o: HousekeepingOptions;
  constructor(o: HousekeepingOptions) {
    this.#o = o;
  }

  /** A pass now, then one every SANDGATE_SWEEP_INTERVAL_MS. */
  start(): void {
    this.#tick();
    this.#timer = setInterval(() => this.#tick(), this.#o.config.sweepIntervalMs);
  }

  /** Stops the passes; resolves once the one under way, if any, has ended. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#pass;
  }

  #tick(): void {
    this.#pass = this.#housekeeping().catch((err: unknown) => {
      if (err instanceof SandgateError && err.code === 'backend_unavailable') this.#o.stats.engineErrors++;
      this.#o.log.error({ err }, 'housekeeping failed');
    });
  }

  /**
   * Ends runs recorded but never enqueued (their gateway stopped in between, or Redis lost the job): after a grace of
   * three leases, a queued run with no job would otherwise hold its session's lock until the lock's 24 h expire.
   */
  async #endStranded(): Promise<void> {
    const { config, executions, redis } = this.#o;
    for (const stranded of await executions.queuedBefore(Date.now() - 3 * config.leaseMs)) {
      if ((await redis.exists(this.#o.jobKey(stranded))) === 1) continue;
      const rec = await executions.get(stranded);
      if (!rec) continue;
      const result = platformResult(
        'error',
        'backend_unavailable',
        'the execution was recorded but never queued; it did not run',
      );
      if (await executions.finalize(rec, result, ['queued'])) {
        this.#o.log.warn({ executionId: stranded }, 'execution ended: it was never queued');
      }
    }
  }

  /**
   * Ends runs whose worker died or that were never queued,
   * removes every sandbox no live run owns, then expired sessions.
   */
  async #housekeeping(): Promise<void> {
    const { config, backend, workspaces, executions, sessions, ledger, registry, runs } = this.#o;
    const id = this.#o.workerId;
    const wlog = this.#o.log;
    await this.#endStranded();
    const { live, lost: lostRuns } = await executions.leases();
    for (const lost of lostRuns) {
      // Ours, and alive: its lease lapsed while Redis was away (renewals failed), not because we stopped.
      if (runs.has(lost)) {
        await executions.renewLease(lost, id, config.leaseMs);
        continue;
      }
      const rec = await executions.get(lost);
      if (!rec) continue;
      // The result carries what the run streamed before its worker stopped: its clients saw that output.
      const streamed = await streamedParts(this.#o.redis, executions.eventsKey(lost), config.maxOutputBytes);
      const result = {
        ...platformResult('error', 'worker_lost', 'the worker running this execution stopped'),
        ...streamed,
        duration_ms: rec.started_at === null ? 0 : Date.now() - rec.started_at,
      };
      const ended = await executions.finalize(rec, result, ['running']);
      if (ended) {
        const ids = { execution_id: lost, session_id: rec.session_id, tenant: rec.tenant };
        wlog.warn(ids, 'execution ended: its worker was lost');
      }
    }
    for (const idle of await this.#o.sessions.idleDue()) {
      await this.#o.ops.pauseIdle(idle).catch((err: unknown) => {
        if (err instanceof SandgateError && err.code === 'backend_unavailable') this.#o.stats.engineErrors++;
        wlog.warn({ err, sessionId: idle }, 'could not pause an idle session');
      });
    }
    for (const idInFlight of runs.ids()) live.add(idInFlight);
    const workers = await registry.aliveIds(WORKER_ALIVE_MS);
    workers.add(id);
    // When the sessions were read: a session resumed after it (on any worker) keeps what its new sandbox made.
    const readAt = Date.now();
    const { removed } = await backend.sweep({ executions: live, sessions: await sessions.liveIds(), workers, readAt });
    if (removed.length > 0) wlog.info({ removed }, 'removed orphaned sandboxes');
    for (const s of await sessions.expired()) {
      if (s.tenant === null) await sessions.forget(s.id);
      else if (!(await sessions.delete({ id: s.id, tenant: s.tenant }, false))) continue;
      await workspaces.remove(s.id);
      if (s.tenant !== null) await ledger.forget(s.tenant, s.id);
      wlog.info({ sessionId: s.id }, 'session removed: its retention passed');
    }
  }
}
