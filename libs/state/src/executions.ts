import {
  SandgateError,
  isTerminal,
  type ExecutionJob,
  type WebhookStatus,
  type ExecutionResult,
  type ExecutionState,
  type PhaseEvent,
  type ResultEvent,
  type TerminalState,
} from '@sandgate/contracts';
import type { StoredEvent } from './event-hub.ts';
import type { Keys } from './keys.ts';
import { randomHex } from './random-ids.ts';
import type { LuaRedis } from './lua-scripts.ts';
import { maxSessionsError } from './sessions.ts';
import { DeploymentStats } from './deployment-stats.ts';
import { pageIndex, type Page } from './time-index.ts';

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
  /** Where the ended run is POSTed, if anywhere; its delivery so far. */
  callback_url?: string | null;
  webhook?: WebhookStatus | null;
}

export interface StartOptions {
  /** The tenant's limit of live sessions: running again in a one-shot's session makes it one. */
  maxSessions: number;
  /** Runs the tenant may have queued or running (0: no limit); one more is refused with quota_exceeded. */
  maxInFlight: number;
  /**
   * The tenant's storage quota in bytes (0 or absent: none): a tenant whose files take more than it runs nothing more
   * (runs write files), refused with storage_quota_exceeded. At the quota runs still run: a paused session's bytes are
   * counted already, and resuming it costs none more.
   */
  maxStorageBytes?: number;
  /** Create the session on the way, as a one-shot's (counted as no live session), with this idle TTL. */
  oneshotTtlSeconds?: number;
  /** The channel of the EndedNotices that waits for this run; default: none. */
  notify?: string;
}

/** What markRunning answers: the run to execute, or why not now. */
export type MarkRunning =
  | { state: 'running'; job: ExecutionJob }
  | { state: 'cancel_requested'; job: ExecutionJob }
  | { state: 'not_queued' }
  | { state: 'throttled' };

/** The highest priority BullMQ takes (lower runs first). */
export const MAX_PRIORITY = 2_097_151;

export const newExecutionId = () => `exec_${randomHex(8)}`;

const phase = (p: PhaseEvent['phase'], at = Date.now()) =>
  JSON.stringify({ phase: p, at: new Date(at).toISOString() } satisfies PhaseEvent);

/** Execution records and their one-way state machine: queued → running → a terminal state. */
export class ExecutionStore {
  readonly #stats: DeploymentStats;

  readonly #redis: LuaRedis;
  readonly #k: Keys;
  readonly #opts: { retentionSeconds: number };
  constructor(redis: LuaRedis, k: Keys, opts: { retentionSeconds: number }) {
    this.#redis = redis;
    this.#k = k;
    this.#opts = opts;
    this.#stats = new DeploymentStats(redis, k);
  }

  /**
   * Records a queued execution with its spec (the job a worker runs; dropped when the run ends) and takes its
   * session's lock, atomically; for a one-shot, creates that session first, in the same step. The lock outlives any
   * sane queue wait; the worker or the reaper releases it when the run ends. With `notify`, the run's ending is
   * published to that channel. Answers the run's rank in its tenant's queue: 1 + the highest rank the tenant has
   * queued, so runs of one tenant keep their order and a tenant with nothing queued goes first (fair scheduling).
   */
  async start(meta: ExecutionMeta, spec: ExecutionJob, opts: StartOptions): Promise<number> {
    const { maxSessions, maxInFlight, maxStorageBytes = 0, oneshotTtlSeconds, notify = '' } = opts;
    const k = this.#k;
    const r = await this.#redis.sgStartExecution(
      k.session(meta.session_id),
      k.sessionLock(meta.session_id),
      k.execution(meta.id),
      k.tenantSessions(meta.tenant),
      k.sessionExpiry(),
      k.tenantExecutions(meta.tenant),
      k.sessionExecutions(meta.session_id),
      k.events(meta.id),
      k.tenantSessionList(meta.tenant),
      k.queued(),
      k.tenantQueued(meta.tenant),
      k.tenantRunning(meta.tenant),
      k.sessionIdle(),
      k.tenantStorage(meta.tenant),
      meta.session_id,
      meta.tenant,
      meta.id,
      meta.created_at,
      JSON.stringify(meta),
      24 * 3600 * 1000,
      this.#opts.retentionSeconds,
      phase('queued', meta.created_at),
      notify,
      JSON.stringify(spec),
      maxInFlight,
      maxSessions,
      oneshotTtlSeconds === undefined ? '0' : '1',
      oneshotTtlSeconds ?? 0,
      k.executionPrefix(),
      spec.timeout_ms,
      maxStorageBytes,
    );
    if (typeof r === 'number') return r;
    if (typeof r === 'string' && r.startsWith('storage ')) {
      throw new SandgateError(
        'storage_quota_exceeded',
        `the tenant's files take ${r.slice(8)} bytes, over its storage quota of ${maxStorageBytes} bytes; ` +
          'delete files or sessions to run again',
      );
    }
    if (r === 'max_sessions') throw await maxSessionsError(this.#redis, k, meta.tenant, maxSessions);
    if (r === 'not_found')
      throw new SandgateError('session_not_found', `session ${meta.session_id} does not exist or has expired`);
    if (r === 'quota') {
      const detail = `tenant already has ${maxInFlight} executions queued or running; wait for one to end`;
      throw new SandgateError('quota_exceeded', detail, { extra: { retry_after: 1 } });
    }
    throw new SandgateError(
      'session_busy',
      `session ${meta.session_id} is running another execution (or being paused, forked, snapshotted …); ` +
        'wait for it or cancel it',
    );
  }

  eventsKey(id: string): string {
    return this.#k.events(id);
  }

  async get(id: string): Promise<ExecutionRecord | null> {
    const h = await this.#redis.hgetall(this.#k.execution(id));
    if (!h.meta) return null;
    return {
      ...(JSON.parse(h.meta) as ExecutionMeta),
      state: h.state as ExecutionState,
      started_at: h.started_at ? Number(h.started_at) : null,
      finished_at: h.finished_at ? Number(h.finished_at) : null,
      result: h.result ? (JSON.parse(h.result) as ExecutionResult) : null,
      callback_url: h.callback ?? null,
      webhook: h.webhook
        ? (JSON.parse(h.webhook) as WebhookStatus)
        : h.callback
          ? { state: 'pending', attempts: [] }
          : null,
    };
  }

  /** Sets where the run is POSTed when it ends; before it is queued, so that no ending can miss it. */
  async setCallback(id: string, url: string): Promise<void> {
    await this.#redis.hset(this.#k.execution(id), 'callback', url);
  }

  /** Records the delivery of the run's webhook so far. */
  async setWebhook(id: string, status: WebhookStatus): Promise<void> {
    await this.#redis.hset(this.#k.execution(id), 'webhook', JSON.stringify(status));
  }

  /** The execution if it exists and belongs to `tenant`; otherwise execution_not_found. */
  async require(tenant: string, id: string): Promise<ExecutionRecord> {
    const r = await this.get(id);
    if (!r || r.tenant !== tenant)
      throw new SandgateError('execution_not_found', `execution ${id} does not exist or has expired`);
    return r;
  }

  /** A page of the tenant's executions (of one session, in one state), newest first, after `after`. */
  async page(
    tenant: string,
    filter: { sessionId?: string; state?: string },
    after: string | null,
    limit: number,
  ): Promise<Page<ExecutionRecord>> {
    const index = filter.sessionId ? this.#k.sessionExecutions(filter.sessionId) : this.#k.tenantExecutions(tenant);
    return pageIndex(this.#redis, index, after, limit, async (ids) =>
      (await Promise.all(ids.map((id) => this.get(id)))).map((r) =>
        r && r.tenant === tenant && (!filter.state || r.state === filter.state) ? r : null,
      ),
    );
  }

  /**
   * queued → running, with the worker's lease, unless the tenant already runs `maxRunning` (0: no limit): then
   * `throttled`, and the run stays queued. `not_queued` when the run is no longer queued (cancelled, reaped);
   * `cancel_requested` when it is now running but a cancel came before the worker could listen for one. With
   * `queuedMs` (how long the run waited in the queue), a run that starts is observed in the queue wait histogram
   * (/metrics) in the same step.
   */
  async markRunning(
    id: string,
    tenant: string,
    workerId: string,
    leaseMs: number,
    maxRunning: number,
    queuedMs?: number,
  ): Promise<MarkRunning> {
    const k = this.#k;
    const wait = queuedMs === undefined ? null : this.#stats.queueWaitOf(queuedMs);
    const [code, spec] = (await this.#redis.sgMarkRunning(
      k.execution(id),
      k.lease(id),
      k.running(),
      k.cancelFlag(id),
      k.queued(),
      k.tenantQueued(tenant),
      k.tenantRunning(tenant),
      k.statsHistogram('queue_wait'),
      id,
      Date.now(),
      workerId,
      leaseMs,
      maxRunning,
      k.executionPrefix(),
      wait?.series ?? '',
      wait?.le ?? '',
      wait?.seconds ?? 0,
    )) as [number, string | undefined];
    if (code === 0) return { state: 'not_queued' };
    if (code === 3) return { state: 'throttled' };
    return { state: code === 2 ? 'cancel_requested' : 'running', job: JSON.parse(spec!) as ExecutionJob };
  }

  /** Runs still queued that were recorded before `before` (ms), oldest first: housekeeping checks they have a job. */
  async queuedBefore(before: number, limit = 100): Promise<string[]> {
    return this.#redis.zrangebyscore(this.#k.queued(), '-inf', before, 'LIMIT', 0, limit);
  }

  async renewLease(id: string, workerId: string, leaseMs: number): Promise<void> {
    await this.#redis.set(this.#k.lease(id), workerId, 'PX', leaseMs);
  }

  /**
   * Ends a run: state, result, `done` and `result` events and the session lock, in one step.
   * Only from the given states, so concurrent finishers (worker, reaper, cancel) produce one result.
   * `pending` are events of the run not written yet (EventWriter.takePending): they go in before `done`.
   * The ending is counted in the deployment's stats (/metrics) in the same step, once, by the finisher that ends it.
   * `storageBytes`, the bytes the session's files take now, is recorded in the tenant's storage ledger in the same
   * step too, whether or not this call ends the run.
   */
  async finalize(
    rec: Pick<ExecutionMeta, 'id' | 'session_id' | 'tenant' | 'language'>,
    result: ExecutionResult,
    from: ExecutionState[],
    pending: string[] = [],
    { storageBytes }: { storageBytes?: number } = {},
  ): Promise<boolean> {
    const now = Date.now();
    const k = this.#k;
    const duration = this.#stats.endedDuration(rec.language, result);
    const r = await this.#redis.sgFinalize(
      k.execution(rec.id),
      k.events(rec.id),
      k.sessionLock(rec.session_id),
      k.running(),
      k.lease(rec.id),
      k.queued(),
      k.tenantQueued(rec.tenant),
      k.tenantRunning(rec.tenant),
      k.webhooksDue(),
      k.statsCounters(),
      duration.key,
      k.tenantStorage(rec.tenant),
      rec.id,
      now,
      JSON.stringify(result),
      result.state,
      this.#opts.retentionSeconds,
      from.join(','),
      phase('done', now),
      JSON.stringify({ result } satisfies ResultEvent),
      this.#stats.endedCounter(result),
      duration.series,
      duration.le,
      duration.seconds,
      storageBytes === undefined ? '' : rec.session_id,
      storageBytes ?? 0,
      ...pending,
    );
    return r === 1;
  }

  /** Runs marked running, split by whether some worker still renews their lease (`live`) or stopped (`lost`). */
  async leases(): Promise<{ live: Set<string>; lost: string[] }> {
    const ids = await this.#redis.smembers(this.#k.running());
    const alive = await Promise.all(ids.map((id) => this.#redis.exists(this.#k.lease(id))));
    return { live: new Set(ids.filter((_, i) => alive[i] === 1)), lost: ids.filter((_, i) => alive[i] === 0) };
  }

  async requestCancel(id: string): Promise<void> {
    await this.#redis
      .multi()
      .set(this.#k.cancelFlag(id), '1', 'EX', this.#opts.retentionSeconds)
      .publish(this.#k.cancelChannel(), id)
      .exec();
  }
}

/** How a run ended, as its `result` event and the EndedNotices published at finalisation carry it. */
export interface Ending {
  result: ExecutionResult;
  startedAt: number | null;
  finishedAt: number;
}

/**
 * An ending from the three strings sgFinalize writes: the `result` event's JSON, started_at (empty: never),
 * finished_at.
 */
export function parseEnding(resultEvent: string, startedAt: string, finishedAt: string): Ending {
  return {
    result: (JSON.parse(resultEvent) as ResultEvent).result,
    startedAt: startedAt ? Number(startedAt) : null,
    finishedAt: Number(finishedAt),
  };
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
export function platformResult(
  state: TerminalState,
  reason: ExecutionResult['reason'],
  message: string,
): ExecutionResult {
  return {
    state,
    exit_code: -1,
    stdout: '',
    stderr: '',
    stdout_truncated: false,
    stderr_truncated: false,
    artifacts: [],
    duration_ms: 0,
    ...(reason ? { reason } : {}),
    message,
  };
}

export { isTerminal };
