import type { Logger } from 'pino';
import { SandgateError, type ExecutionResult, type QueuedExecution } from '@sandgate/contracts';
import type { ExecutionBackend } from '@sandgate/backends';
import {
  EventWriter,
  platformResult,
  type ExecutionStore,
  type Keys,
  type LuaRedis,
  type ScriptStore,
  type SessionStore,
  type StorageLedger,
} from '@sandgate/state';
import { limitsFor, type Config } from '@sandgate/config';
import { SessionCopies, type Workspaces } from '@sandgate/storage';
import type { LeaseKeeper } from './lease-keeper.ts';
import type { WorkerStats } from './worker-stats.ts';

/** How long the code of a completed run is kept so that POST /v1/scripts can save it by execution id. */
export const RUN_CODE_TTL_S = 3600;

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

export interface RunExecutorOptions {
  config: Config;
  /** The worker's logger: each run logs through a child bound to its ids. */
  log: Logger;
  backend: ExecutionBackend;
  workspaces: Workspaces;
  /** The worker's id, which a run's lease names. */
  workerId: string;
  redis: LuaRedis;
  k: Keys;
  executions: ExecutionStore;
  scripts: ScriptStore;
  stats: WorkerStats;
  leases: LeaseKeeper;
  sessions: SessionStore;
  /** A stateful session's saved variables are counted beside its files (the files themselves: by finalize). */
  ledger: StorageLedger;
}

/**
 * Runs queued executions through the backend, one call per run, from `running` to the result written: the run's
 * lease, its cancel, its events, its storage, its code kept for saving. Knows the runs it holds now.
 */
export class RunExecutor {
  readonly #inFlight = new Map<string, AbortController>();
  /** The grace the shutdown gave, which a run it stopped names. */
  #graceUsed: number;

  readonly #o: RunExecutorOptions;
  constructor(o: RunExecutorOptions) {
    this.#o = o;
    this.#graceUsed = o.config.shutdownGraceMs;
  }

  /** Runs held now. */
  get size(): number {
    return this.#inFlight.size;
  }

  has(executionId: string): boolean {
    return this.#inFlight.has(executionId);
  }

  ids(): IterableIterator<string> {
    return this.#inFlight.keys();
  }

  /** A cancel was published: the run, if this worker holds it, sees its signal abort. */
  cancel(executionId: string): void {
    this.#inFlight.get(executionId)?.abort();
  }

  /** Stops every run held: each ends as `error`/`shutdown`, naming `graceMs`, the grace it did not finish within. */
  stopAll(graceMs: number): void {
    this.#graceUsed = graceMs;
    for (const ac of this.#inFlight.values()) ac.abort(SHUTDOWN);
  }

  /** Runs one queued execution to its end; `throttled` when its tenant runs its maximum already (it stays queued). */
  async run(queued: QueuedExecution, queuedAt: number): Promise<'throttled' | void> {
    const { config, backend, workspaces, redis, k, executions, scripts, stats, leases } = this.#o;
    const id = this.#o.workerId;
    // Every line about a run carries its ids and tenant, so `execution_id` finds them all across processes.
    let jlog = this.#o.log.child({ execution_id: queued.execution_id, tenant: queued.tenant });
    const ac = new AbortController();
    this.#inFlight.set(queued.execution_id, ac);
    try {
      const maxRunning = limitsFor(config, queued.tenant).max_running;
      // The run's wait in the queue is observed (/metrics) in the same step as it starts.
      const started = await executions.markRunning(
        queued.execution_id,
        queued.tenant,
        id,
        config.leaseMs,
        maxRunning,
        Date.now() - queuedAt,
      );
      if (started.state === 'throttled') return 'throttled';
      if (started.state === 'not_queued') {
        jlog.info('execution no longer queued (cancelled or reaped); skipping');
        return;
      }
      const { job } = started;
      jlog = jlog.child({ session_id: job.session_id });
      // The cancel was published before this run was in `inFlight`: the backend sees it through the signal.
      if (started.state === 'cancel_requested') ac.abort();
      leases.track(job.execution_id, jlog);
      const events = new EventWriter(redis, k.events(job.execution_id));
      let result: ExecutionResult;
      try {
        jlog.info({ language: job.language }, 'execution started');
        result = await backend.execute(job, events, ac.signal, jlog);
      } catch (err) {
        jlog.error({ err }, 'execution failed in the platform');
        const reason =
          err instanceof SandgateError && err.code === 'backend_unavailable' ? 'backend_unavailable' : undefined;
        if (reason) {
          stats.engineErrors++;
          // Learn at once whether the engine is gone, rather than at the next heartbeat: runs keep coming meanwhile.
          stats.probe();
        }
        result = platformResult(
          'error',
          reason,
          err instanceof SandgateError ? err.message : 'the sandbox backend failed; see the worker log',
        );
      } finally {
        leases.untrack(job.execution_id);
      }
      if (ac.signal.reason === SHUTDOWN) result = shutdownResult(result, this.#graceUsed);
      // What the backend reported and is not sent yet goes out with the result, in one step (taken before the wait
      // below, so that the last events of a short run do not cost a write of their own).
      const pending = events.takePending();
      // What the run wrote counts against its tenant's storage quota, before anyone learns that it ended: recorded in
      // the same step as the ending.
      const storageBytes = await workspaces.usedBytes(job.session_id).catch((err: unknown) => {
        jlog.warn({ err }, "could not measure the session's storage");
        return undefined;
      });
      if (job.sandbox === 'stateful') {
        // Saved variables the run's new interpreter loaded are no longer kept (nor counted); a failed load's are not.
        await this.#o.ledger
          .recordBeside(
            job.tenant,
            job.session_id,
            'state',
            await new SessionCopies(workspaces).stateBytes(job.session_id),
          )
          .catch((err: unknown) => jlog.warn({ err }, "could not record the session's saved variables"));
      }
      await Promise.all([
        executions.finalize(
          { id: job.execution_id, session_id: job.session_id, tenant: job.tenant, language: job.language },
          result,
          ['running'],
          pending,
          storageBytes === undefined ? {} : { storageBytes },
        ),
        events.flush().catch((err: unknown) => jlog.warn({ err }, 'some events could not be written')),
      ]);
      if (job.sandbox !== 'oneshot') {
        // Its idle time counts from the end of its last run.
        void this.#o.sessions
          .idleFrom({ id: job.session_id, tenant: job.tenant })
          .catch((err: unknown) => jlog.warn({ err }, "could not push the session's pause time"));
      }
      if (result.state === 'completed' && job.keep_code === true) {
        // Asked for (keep_code): the code of a run that succeeded stays an hour, to be saved as a script; env and
        // stdin are gone with the run as always.
        await scripts
          .keepRunCode(job.execution_id, job.language, job.code, RUN_CODE_TTL_S)
          .catch((err: unknown) => jlog.warn({ err }, "could not keep the run's code for saving"));
      }
      jlog.info({ state: result.state, exitCode: result.exit_code, ms: result.duration_ms }, 'execution finished');
    } finally {
      this.#inFlight.delete(queued.execution_id);
    }
  }
}
