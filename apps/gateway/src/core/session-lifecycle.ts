import { randomBytes } from 'node:crypto';
import {
  SandgateError,
  type ExecutionJob,
  type ResumedEvent,
  type SavedVariables,
  type SessionOpJob,
  type SessionOpName,
  type Snapshot,
} from '@sandgate/contracts';
import { limitsFor } from '@sandgate/config';
import { newOpId, SESSION_OP_LOCK_MS, type SessionRecord } from '@sandgate/state';
import { SessionCopies } from '@sandgate/storage';
import type { GatewayDeps } from '../deps.ts';
import { withTemplate } from './execution-control.ts';

/** The gateway answers before its own request timeout: an operation still going on is reported as such. */
const WAIT_MS = 4 * 60_000;

/**
 * Pause, resume, fork, snapshots and undo of sessions, as the REST routes and the MCP tools do them. Each takes the
 * session's lock (so it never races a run: a run meanwhile gets session_busy, and so does this while a run goes),
 * and is done by a worker (a job of its own on the executions queue), whose answer this waits for.
 */
export class SessionLifecycle {
  readonly #copies: SessionCopies;

  readonly #d: GatewayDeps;
  constructor(d: GatewayDeps) {
    this.#d = d;
    this.#copies = new SessionCopies(d.workspaces);
  }

  /** Saves a stateful session's variables and removes its sandbox; its files stay. A paused one stays as it is. */
  async pause(tenant: string, id: string, discardVariables = false) {
    const s = await this.#d.sessions.require(tenant, id);
    const { variables } = (await this.#op(s, 'pause', { discard_variables: discardVariables })) as {
      variables: SavedVariables | null;
    };
    return { session: await this.#d.sessions.require(tenant, id), variables };
  }

  /** Brings a paused session back in a new sandbox now (a run would too); one that is not paused is left as it is. */
  async resume(tenant: string, id: string) {
    await this.#d.sessions.require(tenant, id);
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      // A session the platform is pausing by itself (idle) is resumed once that pause has ended.
      await this.#d.sessions.waitOutAutoOp(id, deadline);
      try {
        return await this.#resumeOnce(tenant, id);
      } catch (err) {
        if (!(err instanceof SandgateError && err.code === 'session_busy')) throw err;
        if (!(await this.#d.sessions.waitOutAutoOp(id, deadline))) throw err;
      }
    }
  }

  async #resumeOnce(tenant: string, id: string) {
    const s = await this.#d.sessions.require(tenant, id);
    if (s.pausedAt === null) return { session: s, resumed: null };
    const resumed = await this.#resume(s);
    return { session: await this.#d.sessions.require(tenant, id), resumed };
  }

  /**
   * Makes the session's sandbox now if it has none (paused, or never run), as a resume does; one it has is kept. For
   * what needs the sandbox itself rather than a run (a terminal).
   */
  async bringUp(tenant: string, id: string): Promise<void> {
    await this.#resume(await this.#d.sessions.require(tenant, id));
  }

  async #resume(s: SessionRecord): Promise<ResumedEvent> {
    const spec: ExecutionJob = {
      execution_id: `exec_${randomBytes(6).toString('hex')}`,
      tenant: s.tenant,
      session_id: s.id,
      language: 'python',
      code: '',
      timeout_ms: this.#d.config.execTimeoutMs,
      memory_mb: this.#d.config.memoryMb,
      cpus: this.#d.config.cpus,
      env: {},
      stdin: null,
      ...this.#d.executionControl.sandboxOf(s),
    };
    // A session that is not paused (bringUp) has no pause to report: it resumes from now.
    spec.paused_at ??= Date.now();
    // Its sandbox comes back as it was made: the template's image, env and default limits.
    if (s.template) withTemplate(spec, {}, s.template);
    return (await this.#op(s, 'resume', { spec }, { live: true })) as ResumedEvent;
  }

  /**
   * `count` new sessions, each a copy of this one's files and variables (a live interpreter is checkpointed, not
   * stopped): made paused, they come up at their first run. Each counts against the storage quota as its own.
   */
  async fork(tenant: string, id: string, count = 1, metadata?: Record<string, string>): Promise<SessionRecord[]> {
    const s = await this.#d.sessions.require(tenant, id);
    await this.#checkStorage(tenant);
    const made: SessionRecord[] = [];
    try {
      for (let i = 0; i < count; i++) made.push(await this.#paused(s, metadata ?? s.metadata));
      await this.#op(s, 'fork', { targets: made.map((m) => m.id) });
    } catch (err) {
      for (const m of made) await this.#drop(m);
      throw err;
    }
    return Promise.all(made.map((m) => this.#d.sessions.require(tenant, m.id)));
  }

  /** Keeps the session's files (and a stateful session's variables) as they are now, as the snapshot `name`. */
  async snapshot(tenant: string, id: string, name: string): Promise<Snapshot> {
    const { sessions, config } = this.#d;
    const s = await sessions.require(tenant, id);
    const existing = await sessions.snapshots(s.id);
    if (existing.some((x) => x.name === name)) {
      throw new SandgateError('snapshot_exists', `session ${s.id} has a snapshot ${name} already; delete it first`);
    }
    if (existing.length >= config.maxSnapshots) {
      throw new SandgateError(
        'max_snapshots',
        `session ${s.id} has ${existing.length} snapshots, the most it may keep (SANDGATE_MAX_SNAPSHOTS); delete one`,
      );
    }
    await this.#checkStorage(tenant);
    return (await this.#op(s, 'snapshot', { name })) as Snapshot;
  }

  async snapshots(tenant: string, id: string): Promise<Snapshot[]> {
    const s = await this.#d.sessions.require(tenant, id);
    return this.#d.sessions.snapshots(s.id);
  }

  /** Deletes a snapshot (under the session's lock, so never during a restore of it). */
  async deleteSnapshot(tenant: string, id: string, name: string): Promise<void> {
    const { sessions, ledger } = this.#d;
    const s = await sessions.require(tenant, id);
    const owner = newOpId();
    await this.#lock(s, owner, { lockMs: SESSION_OP_LOCK_MS });
    try {
      if (!(await sessions.removeSnapshot(s.id, name))) {
        throw new SandgateError('snapshot_not_found', `session ${s.id} has no snapshot ${name}`);
      }
      await this.#copies.deleteSnapshot(s.id, name);
      await ledger.recordBeside(tenant, s.id, `snapshot/${name}`, 0);
    } finally {
      await sessions.unlock(s, owner, 'keep', true);
    }
  }

  /**
   * Rolls the session back to a snapshot (its sandbox goes; it comes back, paused, with the snapshot's files and
   * variables), or with `intoNew` makes a new session (paused) from it. Answers the session rolled back or made.
   */
  async restore(tenant: string, id: string, name: string, intoNew: boolean): Promise<SessionRecord> {
    const s = await this.#d.sessions.require(tenant, id);
    if (!(await this.#d.sessions.snapshots(s.id)).some((x) => x.name === name)) {
      throw new SandgateError('snapshot_not_found', `session ${s.id} has no snapshot ${name}`);
    }
    if (!intoNew) {
      await this.#op(s, 'restore', { name });
      return this.#d.sessions.require(tenant, id);
    }
    await this.#checkStorage(tenant);
    const made = await this.#paused(s, s.metadata);
    try {
      await this.#op(s, 'restore', { name, targets: [made.id] });
    } catch (err) {
      await this.#drop(made);
      throw err;
    }
    return this.#d.sessions.require(tenant, made.id);
  }

  /** Brings the files back to how they were before the last run (and the variables, with undo "state"). */
  async undo(tenant: string, id: string) {
    const s = await this.#d.sessions.require(tenant, id);
    if (s.undo === 'off') {
      throw new SandgateError('nothing_to_undo', `session ${s.id} was made with undo "off": it keeps no undo steps`);
    }
    const result = (await this.#op(s, 'undo', {})) as {
      undone_execution_id: string;
      variables: boolean;
      remaining: number;
    };
    return { session: await this.#d.sessions.require(tenant, id), ...result };
  }

  /** Forgets a session's saved variables (a restart: its next interpreter starts afresh). */
  async dropVariables(id: string): Promise<void> {
    await this.#copies.removeState(id);
  }

  /** A paused session made like `from` (its mode, template, retention, idle time, undo), to hold a copy of it. */
  #paused(from: SessionRecord, metadata: Record<string, string>): Promise<SessionRecord> {
    return this.#d.sessions.create(from.tenant, {
      ttlSeconds: from.ttlSeconds,
      maxSessions: this.#d.config.maxSessions,
      mode: from.mode,
      metadata,
      idleSeconds: from.idleSeconds,
      undo: from.undo,
      paused: true,
      forkedFrom: from.id,
      ...(from.template ? { template: from.template } : {}),
    });
  }

  async #drop(s: SessionRecord): Promise<void> {
    await this.#d.sessions.delete(s, true);
    await this.#d.workspaces.remove(s.id);
    await this.#d.ledger.forget(s.tenant, s.id);
  }

  /** Copies take room: a tenant at its storage quota makes none. */
  async #checkStorage(tenant: string): Promise<void> {
    const limit = limitsFor(this.#d.config, tenant).storage_bytes;
    if (limit === 0) return;
    const used = await this.#d.ledger.total(tenant);
    if (used >= limit) {
      throw new SandgateError(
        'storage_quota_exceeded',
        `the tenant's files take ${used} bytes, its whole storage quota of ${limit} bytes; delete files, snapshots ` +
          'or sessions first',
      );
    }
  }

  /**
   * Takes the session's lock for `owner`. An operation the platform does by itself (an idle pause) is waited out, not
   * refused: the user did nothing to conflict with it. A run (or an operation a user asked for) answers session_busy.
   */
  async #lock(
    s: SessionRecord,
    owner: string,
    opts: { lockMs: number; live?: boolean; maxSessions?: number },
  ): Promise<void> {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      try {
        return await this.#d.sessions.lock(s.tenant, s.id, owner, opts);
      } catch (err) {
        if (!(err instanceof SandgateError && err.code === 'session_busy')) throw err;
        // A resume asks again from the start (resume()): what it sends the worker depends on how the pause left it.
        if (opts.live || !(await this.#d.sessions.waitOutAutoOp(s.id, deadline))) throw err;
      }
    }
  }

  /**
   * Takes the session's lock, queues the operation for a worker and waits for its answer: its result, or the error it
   * ended with. `live`: the session becomes live first (a resume), within the tenant's limit of live sessions.
   */
  async #op(
    s: SessionRecord,
    op: SessionOpName,
    args: Partial<SessionOpJob>,
    { live = false }: { live?: boolean } = {},
  ): Promise<unknown> {
    const { sessions, notices, queue, config, redis } = this.#d;
    const opId = newOpId();
    await this.#lock(s, opId, { lockMs: SESSION_OP_LOCK_MS, live, maxSessions: config.maxSessions });
    const wait = notices.expectOp(opId);
    try {
      const job: SessionOpJob = {
        ...args,
        op_id: opId,
        op,
        tenant: s.tenant,
        session_id: s.id,
        notify: notices.channel,
      };
      try {
        // Ahead of queued runs: it holds the session, and is short.
        await (queue as unknown as { add(name: string, data: SessionOpJob, opts: object): Promise<unknown> }).add(
          'session-op',
          job,
          { jobId: opId, priority: 1 },
        );
      } catch (err) {
        await sessions.unlock(s, opId, live ? 'live' : 'keep', false);
        throw err;
      }
      const deadline = Date.now() + WAIT_MS;
      for (;;) {
        const notice = await wait.next(deadline);
        const answer =
          notice === 'timeout' || notice === 'missed' ? await redis.get(this.#d.keys.sessionOp(opId)) : notice;
        if (answer !== null) {
          const a = JSON.parse(answer) as { ok: true; result: unknown } | { ok: false; code: string; message: string };
          if (a.ok) return a.result;
          throw new SandgateError(a.code as never, a.message);
        }
        if (notice === 'timeout') {
          throw new SandgateError(
            'backend_unavailable',
            `no worker finished the ${op} of session ${s.id} within ${WAIT_MS / 1000} s; it may still end (GET the ` +
              'session to see)',
          );
        }
      }
    } finally {
      wait.cancel();
    }
  }
}
