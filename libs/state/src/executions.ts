import { randomBytes } from 'node:crypto';
import {
  SandgateError, isTerminal, type ExecutionResult, type ExecutionState, type PhaseEvent, type ResultEvent,
  type TerminalState,
} from '@sandgate/contracts';
import type { Keys } from './keys.ts';
import type { ScriptRedis } from './scripts.ts';

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

export const newExecutionId = () => `exec_${randomBytes(8).toString('hex')}`;

const phase = (p: PhaseEvent['phase'], at = Date.now()) =>
  JSON.stringify({ phase: p, at: new Date(at).toISOString() } satisfies PhaseEvent);

/** Execution records and their one-way state machine: queued → running → a terminal state. */
export class ExecutionStore {
  constructor(
    private readonly redis: ScriptRedis,
    private readonly k: Keys,
    private readonly opts: { retentionSeconds: number },
  ) {}

  /**
   * Records a queued execution and takes its session's lock, atomically. The lock outlives any
   * sane queue wait; the worker or the reaper releases it when the run ends.
   */
  async start(meta: ExecutionMeta): Promise<void> {
    const r = await this.redis.sgStartExecution(
      this.k.session(meta.session_id), this.k.sessionLock(meta.session_id), this.k.execution(meta.id),
      this.k.tenantSessions(meta.tenant), this.k.sessionExpiry(), this.k.tenantExecutions(meta.tenant),
      this.k.sessionExecutions(meta.session_id), this.k.events(meta.id),
      meta.session_id, meta.tenant, meta.id, meta.created_at, JSON.stringify(meta), 24 * 3600 * 1000,
      this.opts.retentionSeconds, phase('queued', meta.created_at),
    );
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

  /** queued → running, with the worker's lease. False when the run is no longer queued (cancelled, reaped). */
  async markRunning(id: string, workerId: string, leaseMs: number): Promise<boolean> {
    const r = await this.redis.sgMarkRunning(this.k.execution(id), this.k.lease(id), this.k.running(), id, Date.now(), workerId, leaseMs);
    return r === 1;
  }

  async renewLease(id: string, workerId: string, leaseMs: number): Promise<void> {
    await this.redis.set(this.k.lease(id), workerId, 'PX', leaseMs);
  }

  /**
   * Ends a run: state, result, `done` and `result` events and the session lock, in one step.
   * Only from the given states, so concurrent finishers (worker, reaper, cancel) produce one result.
   */
  async finalize(rec: Pick<ExecutionMeta, 'id' | 'session_id'>, result: ExecutionResult, from: ExecutionState[]): Promise<boolean> {
    const now = Date.now();
    const r = await this.redis.sgFinalize(
      this.k.execution(rec.id), this.k.events(rec.id), this.k.sessionLock(rec.session_id), this.k.running(), this.k.lease(rec.id),
      rec.id, now, JSON.stringify(result), result.state, this.opts.retentionSeconds, from.join(','),
      phase('done', now), JSON.stringify({ result } satisfies ResultEvent),
    );
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

  async cancelRequested(id: string): Promise<boolean> {
    return (await this.redis.exists(this.k.cancelFlag(id))) === 1;
  }
}

/** A result for a run that ended without the user's code finishing (never ran, lost, cancelled while queued). */
export function platformResult(state: TerminalState, reason: ExecutionResult['reason'], message: string): ExecutionResult {
  return {
    state, exit_code: -1, stdout: '', stderr: '', stdout_truncated: false, stderr_truncated: false,
    artifacts: [], duration_ms: 0, ...(reason ? { reason } : {}), message,
  };
}

export { isTerminal };
