import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import {
  SandgateError,
  type ExecutionJob,
  type ResumedEvent,
  type SavedVariables,
  type SessionOpJob,
  type Snapshot,
} from '@sandgate/contracts';
import type { ExecutionBackend } from '@sandgate/backends';
import {
  newAutoOpId,
  SESSION_OP_LOCK_MS,
  type Keys,
  type LuaRedis,
  type SessionRecord,
  type SessionStore,
  type StorageLedger,
} from '@sandgate/state';
import type { Config } from '@sandgate/config';
import { SessionCopies, type Workspaces } from '@sandgate/storage';

/** How long an operation's answer is kept for a gateway that missed its notice. */
const ANSWER_TTL_S = 300;

/** What a session operation answers: its result, or the error it ended with (code and message, as the API says). */
export type OpAnswer = { ok: true; result: unknown } | { ok: false; code: string; message: string };

export interface SessionOpsOptions {
  config: Config;
  log: Logger;
  backend: ExecutionBackend;
  workspaces: Workspaces;
  redis: LuaRedis;
  k: Keys;
  sessions: SessionStore;
  ledger: StorageLedger;
}

/**
 * A worker's side of what is done to sessions outside runs: pause, resume, fork, snapshot, restore, undo (each queued
 * by a gateway, which took the session's lock for it) and the idle pause housekeeping does itself. Each needs the
 * engine (a sandbox to save from or remove) or the session store, which only workers hold.
 */
export class SessionOps {
  readonly #copies: SessionCopies;

  readonly #o: SessionOpsOptions;
  constructor(o: SessionOpsOptions) {
    this.#o = o;
    this.#copies = new SessionCopies(o.workspaces);
  }

  /** Does a queued operation, lets its lock go, and tells the gateway waiting for it. */
  async run(job: SessionOpJob): Promise<void> {
    const log = this.#o.log.child({ session_id: job.session_id, tenant: job.tenant, op: job.op, op_id: job.op_id });
    let answer: OpAnswer;
    let outcome: 'live' | 'paused' | 'keep';
    const rec = await this.#o.sessions.get(job.tenant, job.session_id);
    try {
      if (!rec) throw new SandgateError('session_not_found', `session ${job.session_id} does not exist or has expired`);
      const done = await this.#do(job, rec, log);
      outcome = done.outcome;
      answer = { ok: true, result: done.result };
    } catch (err) {
      if (!(err instanceof SandgateError)) log.error({ err }, 'session operation failed');
      answer =
        err instanceof SandgateError
          ? { ok: false, code: err.code, message: err.message }
          : { ok: false, code: 'backend_unavailable', message: `the ${job.op} failed: ${(err as Error).message}` };
      // A resume made the session live before it was queued: it stays live (its next run makes a sandbox).
      outcome = job.op === 'resume' ? 'live' : 'keep';
    }
    await this.#o.sessions.unlock({ id: job.session_id, tenant: job.tenant }, job.op_id, outcome, job.op !== 'pause');
    const json = JSON.stringify(answer);
    await this.#o.redis
      .multi()
      .set(this.#o.k.sessionOp(job.op_id), json, 'EX', ANSWER_TTL_S)
      .publish(job.notify, `${job.op_id}\n${json}`)
      .exec();
    log.info({ ok: answer.ok }, 'session operation done');
  }

  async #do(
    job: SessionOpJob,
    rec: SessionRecord,
    log: Logger,
  ): Promise<{ outcome: 'live' | 'paused' | 'keep'; result: unknown }> {
    switch (job.op) {
      case 'pause': {
        if (rec.pausedAt !== null) return { outcome: 'keep', result: { variables: null } };
        const variables = await this.pause(rec, job.discard_variables === true);
        return { outcome: 'paused', result: { variables } };
      }
      case 'resume':
        return { outcome: 'live', result: await this.#resume(job) };
      case 'fork':
        await this.#fork(rec, job.targets ?? []);
        return { outcome: 'keep', result: {} };
      case 'snapshot':
        return { outcome: 'keep', result: await this.#snapshot(rec, job.name!) };
      case 'restore': {
        const into = job.targets?.[0];
        if (into !== undefined) {
          await this.#copies.restoreSnapshot(rec.id, job.name!, into);
          await this.#account(rec.tenant, into);
          return { outcome: 'keep', result: {} };
        }
        await this.#requireSnapshot(rec, job.name!);
        await this.#stop(rec, true);
        await this.#copies.restoreSnapshot(rec.id, job.name!);
        await this.#account(rec.tenant, rec.id);
        return { outcome: 'paused', result: {} };
      }
      case 'undo':
        return { outcome: 'paused', result: await this.#undo(rec, log) };
    }
  }

  /**
   * Saves a stateful session's variables (unless `discard`) and removes its sandbox; records what is kept. The lock
   * is the caller's.
   */
  async pause(rec: SessionRecord, discard: boolean): Promise<SavedVariables | null> {
    const variables = await this.#stop(rec, discard);
    await this.#account(rec.tenant, rec.id);
    return variables;
  }

  /** Removes the session's sandbox; a stateful one's variables are saved first unless `discard`. */
  async #stop(rec: SessionRecord, discard: boolean): Promise<SavedVariables | null> {
    const { backend } = this.#o;
    if (backend.pauseSession === undefined) {
      throw new SandgateError('unsupported_by_backend', `the ${backend.name} backend cannot pause sessions`);
    }
    if (discard) await this.#copies.removeState(rec.id);
    return backend.pauseSession({ sessionId: rec.id, stateful: rec.mode === 'stateful' }, { discard });
  }

  async #resume(job: SessionOpJob): Promise<ResumedEvent> {
    const spec = job.spec as ExecutionJob & { paused_at: number };
    const started = Date.now();
    if (this.#o.backend.resumeSession === undefined) {
      throw new SandgateError('unsupported_by_backend', `the ${this.#o.backend.name} backend cannot resume sessions`);
    }
    const variables = await this.#o.backend.resumeSession(spec);
    await this.#account(job.tenant, job.session_id);
    return { paused_at: new Date(spec.paused_at).toISOString(), duration_ms: Date.now() - started, variables };
  }

  /**
   * The variables of the session now, in a file for copies to take: a live interpreter's checkpoint (a temporary file,
   * `temporary` true), the saved interpreter of a paused session, or none.
   */
  async #stateNow(
    rec: SessionRecord,
  ): Promise<{ file: string | undefined; temporary: boolean; unsaved?: SavedVariables['unsaved'] }> {
    if (rec.mode !== 'stateful') return { file: undefined, temporary: false };
    const temp = join(this.#copies.stateDir(rec.id), `checkpoint-${randomBytes(6).toString('hex')}.dill`);
    const live = await this.#o.backend.checkpointSession?.({ sessionId: rec.id, stateful: true }, temp);
    // Variables whose save did not end in time: the interpreter was ended, and the copies hold the files only.
    if (live?.reason !== undefined) return { file: undefined, temporary: false };
    if (live) return { file: temp, temporary: true, unsaved: live.unsaved };
    const saved = (await this.#copies.stateBytes(rec.id)) > 0 ? this.#copies.stateFile(rec.id) : undefined;
    return { file: saved, temporary: false };
  }

  async #fork(rec: SessionRecord, targets: string[]): Promise<void> {
    const state = await this.#stateNow(rec);
    try {
      for (const target of targets) {
        await this.#copies.fork(rec.id, target);
        if (state.temporary) {
          await this.#copies.adoptState(state.file!, target);
          await this.#copies.noteUnsaved(target, state.unsaved ?? []);
        }
        await this.#account(rec.tenant, target);
      }
    } finally {
      if (state.temporary) await rm(state.file!, { force: true });
    }
  }

  async #snapshot(rec: SessionRecord, name: string): Promise<Snapshot> {
    const state = await this.#stateNow(rec);
    try {
      const size = await this.#copies.snapshot(rec.id, name, state.file);
      const snap: Snapshot = {
        name,
        size_bytes: size,
        created_at: new Date().toISOString(),
        variables: state.file !== undefined,
      };
      await this.#o.sessions.putSnapshot(rec.id, snap);
      await this.#o.ledger.recordBeside(rec.tenant, rec.id, `snapshot/${name}`, size);
      return snap;
    } finally {
      if (state.temporary) await rm(state.file!, { force: true });
    }
  }

  async #requireSnapshot(rec: SessionRecord, name: string): Promise<void> {
    if (!(await this.#o.sessions.snapshots(rec.id)).some((s) => s.name === name)) {
      throw new SandgateError('snapshot_not_found', `session ${rec.id} has no snapshot ${name}`);
    }
  }

  async #undo(rec: SessionRecord, log: Logger) {
    const steps = await this.#copies.undoSteps(rec.id);
    if (steps.length === 0) {
      throw new SandgateError(
        'nothing_to_undo',
        rec.undo === 'off' || this.#copies.kind !== 'snapshot'
          ? `session ${rec.id} keeps no undo steps (undo "off", or a data directory without btrfs snapshots)`
          : `session ${rec.id} has no run left to undo (the last ${this.#o.config.undoDepth} can be)`,
      );
    }
    // With undo "files", the variables stay as they are now: saved, to come back with the files of before.
    const stepHasState = await this.#copies.hasUndoState(steps[0]!);
    const keepVariables = !(rec.undo === 'state' && stepHasState);
    await this.#stop(rec, !keepVariables).catch(async (err: unknown) => {
      if (!(err instanceof SandgateError && err.code === 'state_too_large')) throw err;
      log.warn({ err: err.message }, 'undo: the variables are too large to keep; the interpreter starts afresh');
      await this.#stop(rec, true);
    });
    const step = await this.#copies.undo(rec.id);
    await this.#account(rec.tenant, rec.id);
    return { undone_execution_id: step!.executionId, variables: step!.state, remaining: steps.length - 1 };
  }

  /** What the session keeps counts against its tenant's storage: its files and its saved interpreter. */
  async #account(tenant: string, sessionId: string): Promise<void> {
    const [files, state] = await Promise.all([
      this.#o.workspaces.usedBytes(sessionId),
      this.#copies.stateBytes(sessionId),
    ]);
    await this.#o.ledger.record(tenant, sessionId, files);
    await this.#o.ledger.recordBeside(tenant, sessionId, 'state', state);
  }

  /**
   * Pauses a session idle past its time, if no run or operation holds it (housekeeping). Variables too large to save
   * are dropped (named in the log): an idle session never keeps its sandbox for want of room.
   */
  async pauseIdle(sessionId: string): Promise<boolean> {
    const { sessions, log } = this.#o;
    // An automatic operation: a run or an operation a user asks for meanwhile waits for it instead of being refused.
    const owner = newAutoOpId();
    try {
      await sessions.lock(null, sessionId, owner, { lockMs: SESSION_OP_LOCK_MS });
    } catch (err) {
      if (err instanceof SandgateError) return false; // busy (a run), gone: nothing to pause now
      throw err;
    }
    const tenant = (await sessions.ownerOf(sessionId)) ?? '';
    const rec = await sessions.get(tenant, sessionId);
    let outcome: 'paused' | 'keep' = 'keep';
    try {
      if (rec === null || rec.pausedAt !== null || rec.pausesAt === null || rec.pausesAt > Date.now()) return false;
      await this.pause(rec, false).catch(async (err: unknown) => {
        if (!(err instanceof SandgateError && err.code === 'state_too_large')) throw err;
        log.warn({ sessionId, err: err.message }, 'idle pause: the variables are too large to keep and are dropped');
        await this.pause(rec, true);
      });
      outcome = 'paused';
      log.info({ sessionId, tenant }, 'idle session paused');
      return true;
    } finally {
      await sessions.unlock({ id: sessionId, tenant }, owner, outcome, false);
    }
  }
}
