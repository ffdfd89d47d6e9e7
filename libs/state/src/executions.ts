import type { Redis } from 'ioredis';
import {
  SandgateError, isTerminal, type ExecutionResult, type ExecutionState, type PhaseEvent, type ResultEvent,
  type TerminalState,
} from '@sandgate/contracts';
import type { StoredEvent } from './event-hub.ts';
import type { Keys } from './keys.ts';
import { randomHex } from './random-ids.ts';
import { evalInOrder, type ScriptRedis } from './scripts.ts';
import { maxSessionsError } from './sessions.ts';
import { DeploymentStats } from './deployment-stats.ts';
import { countRedisError } from './redis.ts';

export interface ExecutionMeta {
  id: string;
  tenant: string;
  session_id: string;
  language: string;
  created_at: number;
  timeout_ms: number;
}

export interface ExecutionRecord extends ExecutionMeta {
  state: ExecutionState;
  started_at: number | null;
  finished_at: number | null;
  result: ExecutionResult | null;
}

export interface StartOptions {
  /** A session to create on the way, for a one-shot execution. */
  newSession?: { ttlSeconds: number; maxSessions: number };
  /** The channel of the EndedNotices that waits for this run; default: none. */
  notify?: string;
}

export const newExecutionId = () => `exec_${randomHex(8)}`;

const phase = (p: PhaseEvent['phase'], at = Date.now()) =>
  JSON.stringify({ phase: p, at: new Date(at).toISOString() } satisfies PhaseEvent);

/** Execution records and their one-way state machine: queued → running → a terminal state. */
export class ExecutionStore {
  private readonly stats: DeploymentStats;

  constructor(
    private readonly redis: ScriptRedis,
    private readonly k: Keys,
    private readonly opts: {
      retentionSeconds: number;
      /**
       * Where `start` goes out; default: `redis`. The gateway gives the connection its BullMQ Queue uses, so an
       * enqueue sent right behind a start reaches Redis after it, in the same round trip.
       */
      startOn?: Redis;
    },
  ) {
    this.stats = new DeploymentStats(redis, k);
  }

  /**
   * Records a queued execution and takes its session's lock, atomically; with `newSession`, creates that
   * session first, in the same step (a one-shot's). The lock outlives any sane queue wait; the worker or the
   * reaper releases it when the run ends. With `notify`, the run's ending is published to that channel.
   */
  async start(meta: ExecutionMeta, { newSession, notify = '' }: StartOptions = {}): Promise<void> {
    const r = await evalInOrder(this.opts.startOn ?? this.redis, 'sgStartExecution',
      this.k.session(meta.session_id), this.k.sessionLock(meta.session_id), this.k.execution(meta.id),
      this.k.tenantSessions(meta.tenant), this.k.sessionExpiry(), this.k.tenantExecutions(meta.tenant),
      this.k.sessionExecutions(meta.session_id), this.k.events(meta.id),
      meta.session_id, meta.tenant, meta.id, meta.created_at, JSON.stringify(meta), 24 * 3600 * 1000,
      this.opts.retentionSeconds, phase('queued', meta.created_at), notify,
      ...(newSession ? [newSession.ttlSeconds, newSession.maxSessions] : []),
    );
    if (r === 'max_sessions') throw maxSessionsError(newSession!.maxSessions);
    if (r === 'not_found') throw new SandgateError('session_not_found', `session ${meta.session_id} does not exist or has expired`);
    if (r === 'busy') {
      throw new SandgateError('session_busy', `session ${meta.session_id} is running another execution; wait for it or cancel it`);
    }
  }

  eventsKey(id: string): string {
    return this.k.events(id);
  }

  async get(id: string): Promise<ExecutionRecord | null> {
    const h = await this.redis.hgetall(this.k.execution(id));
    if (!h.meta) return null;
    return {
      ...(JSON.parse(h.meta) as ExecutionMeta),
      state: h.state as ExecutionState,
      started_at: h.started_at ? Number(h.started_at) : null,
      finished_at: h.finished_at ? Number(h.finished_at) : null,
      result: h.result ? (JSON.parse(h.result) as ExecutionResult) : null,
    };
  }

  /** The execution if it exists and belongs to `tenant`; otherwise execution_not_found. */
  async require(tenant: string, id: string): Promise<ExecutionRecord> {
    const r = await this.get(id);
    if (!r || r.tenant !== tenant) throw new SandgateError('execution_not_found', `execution ${id} does not exist or has expired`);
    return r;
  }

  async list(tenant: string, filter: { sessionId?: string; state?: string; limit: number }): Promise<ExecutionRecord[]> {
    const index = filter.sessionId ? this.k.sessionExecutions(filter.sessionId) : this.k.tenantExecutions(tenant);
    const ids = await this.redis.zrevrange(index, 0, 999);
    const out: ExecutionRecord[] = [];
    for (let i = 0; i < ids.length && out.length < filter.limit; i += 100) {
      const page = await Promise.all(ids.slice(i, i + 100).map((id) => this.get(id)));
      for (const r of page) {
        if (r && r.tenant === tenant && (!filter.state || r.state === filter.state) && out.length < filter.limit) out.push(r);
      }
    }
    return out;
  }

  /**
   * queued → running, with the worker's lease. `not_queued` when the run is no longer queued (cancelled, reaped);
   * `cancel_requested` when it is now running but a cancel came before the worker could listen for one.
   */
  async markRunning(id: string, workerId: string, leaseMs: number): Promise<'running' | 'cancel_requested' | 'not_queued'> {
    const r = await this.redis.sgMarkRunning(
      this.k.execution(id), this.k.lease(id), this.k.running(), this.k.cancelFlag(id), id, Date.now(), workerId, leaseMs,
    );
    return r === 2 ? 'cancel_requested' : r === 1 ? 'running' : 'not_queued';
  }

  async renewLease(id: string, workerId: string, leaseMs: number): Promise<void> {
    await this.redis.set(this.k.lease(id), workerId, 'PX', leaseMs);
  }

  /**
   * Ends a run: state, result, `done` and `result` events and the session lock, in one step.
   * Only from the given states, so concurrent finishers (worker, reaper, cancel) produce one result.
   * `pending` are events of the run not written yet (EventWriter.takePending): they go in before `done`.
   * The process that ends a run counts it in the deployment's stats (/metrics), after answering.
   */
  async finalize(
    rec: Pick<ExecutionMeta, 'id' | 'session_id' | 'language'>, result: ExecutionResult, from: ExecutionState[], pending: string[] = [],
  ): Promise<boolean> {
    const now = Date.now();
    const r = await this.redis.sgFinalize(
      this.k.execution(rec.id), this.k.events(rec.id), this.k.sessionLock(rec.session_id), this.k.running(), this.k.lease(rec.id),
      rec.id, now, JSON.stringify(result), result.state, this.opts.retentionSeconds, from.join(','),
      phase('done', now), JSON.stringify({ result } satisfies ResultEvent), ...pending,
    );
    // Stats must never fail or slow down the ending itself; a lost increment shows as a Redis error.
    if (r === 1) this.stats.ended(rec.language, result).catch(countRedisError);
    return r === 1;
  }

  /** Runs marked running, split by whether some worker still renews their lease (`live`) or stopped (`lost`). */
  async leases(): Promise<{ live: Set<string>; lost: string[] }> {
    const ids = await this.redis.smembers(this.k.running());
    const alive = await Promise.all(ids.map((id) => this.redis.exists(this.k.lease(id))));
    return { live: new Set(ids.filter((_, i) => alive[i] === 1)), lost: ids.filter((_, i) => alive[i] === 0) };
  }

  async requestCancel(id: string): Promise<void> {
    await this.redis.multi().set(this.k.cancelFlag(id), '1', 'EX', this.opts.retentionSeconds).publish(this.k.cancelChannel(), id).exec();
  }
}

/** How a run ended, as its `result` event and the EndedNotices published at finalisation carry it. */
export interface Ending {
  result: ExecutionResult;
  startedAt: number | null;
  finishedAt: number;
}

/** An ending from the three strings sgFinalize writes: the `result` event's JSON, started_at (empty: never), finished_at. */
export function parseEnding(resultEvent: string, startedAt: string, finishedAt: string): Ending {
  return { result: (JSON.parse(resultEvent) as ResultEvent).result, startedAt: startedAt ? Number(startedAt) : null, finishedAt: Number(finishedAt) };
}

/** The ending a `result` event stands for; null for an entry that does not carry its times. */
export function endingOf(ev: StoredEvent): Ending | null {
  if (ev.type !== 'result' || !ev.times) return null;
  return parseEnding(ev.data, ev.times.startedAt, ev.times.finishedAt);
}

/** The terminal record of a run, from the record as it was before and how it ended: no need to read it back. */
export function endedRecord(rec: ExecutionRecord, { result, startedAt, finishedAt }: Ending): ExecutionRecord {
  return { ...rec, state: result.state, started_at: startedAt, finished_at: finishedAt, result };
}

/** A result for a run that ended without the user's code finishing (never ran, lost, cancelled while queued). */
export function platformResult(state: TerminalState, reason: ExecutionResult['reason'], message: string): ExecutionResult {
  return {
    state, exit_code: -1, stdout: '', stderr: '', stdout_truncated: false, stderr_truncated: false,
    artifacts: [], duration_ms: 0, ...(reason ? { reason } : {}), message,
  };
}

export { isTerminal };
