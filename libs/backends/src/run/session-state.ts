import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { ExecutionJob, RestoreFailure, ResumedEvent, SavedVariables } from '@sandgate/contracts';
import type { SessionCopies } from '@sandgate/storage';
import { AgentUnanswered, STATE_CHUNK, type AgentChannel } from '../agent/agent-channel.ts';
import type { BackendLogger } from '../logger.ts';
import type { HeldSandbox, SessionHost } from './session-run.ts';

/** How long saving or loading a stateful session's variables may take (a second per 10 MB, and some). */
export const stateTimeoutMs = (bytes: number): number => 60_000 + Math.ceil(bytes / 10_000);

/** What a backend needs to keep sessions' state beside their files: where, and how much at most. */
export interface SessionStateSettings {
  copies: SessionCopies;
  /** SANDGATE_MAX_STATE_BYTES: the most a stateful session's saved variables may take. */
  maxStateBytes: number;
  /**
   * SANDGATE_STATE_SAVE_TIMEOUT_S: how long saving the variables may take at a pause, a fork or a snapshot. Saving runs
   * the session's own code (a `__getstate__`, a `__reduce__`), which may never end.
   */
  saveTimeoutMs: number;
  /** SANDGATE_UNDO_DEPTH: undo steps kept per session. */
  undoDepth: number;
}

/** A session outside a run: which it is, and whether it has a live interpreter whose variables can be saved. */
export interface SessionTarget {
  sessionId: string;
  stateful: boolean;
}

/**
 * Saves the interpreter's variables to `file` (written aside and renamed, so a failed save leaves what was there).
 * The bytes are the interpreter's pickle: the worker stores them and never unpickles them.
 */
export async function saveVariables(
  channel: AgentChannel,
  file: string,
  maxBytes: number,
  { timeoutMs = stateTimeoutMs(maxBytes), signal }: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<SavedVariables> {
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const part = `${file}.part-${randomBytes(6).toString('hex')}`;
  const handle = await open(part, 'w', 0o600);
  let position = 0;
  try {
    const saved = await channel.saveState(
      {
        write: async (bytes) => {
          await handle.write(bytes, 0, bytes.length, position);
          position += bytes.length;
        },
        restart: async () => {
          await handle.truncate(0);
          position = 0;
        },
      },
      maxBytes,
      timeoutMs,
      signal,
    );
    await handle.close();
    await rename(part, file);
    return { saved: saved.saved, unsaved: saved.unsaved, size_bytes: saved.size };
  } catch (err) {
    await handle.close().catch(() => {});
    await rm(part, { force: true });
    throw err;
  }
}

/** Bounds of a load of saved variables: a deadline (the run's time left), and the run's cancel. */
export interface LoadBounds {
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** What came back of a session's saved variables; `failed`: the sandbox must go (its interpreter in no known state). */
export type Restored = NonNullable<ResumedEvent['variables']> & { failed?: RestoreFailure };

/**
 * Loads the variables saved in `file` into the sandbox's interpreter, within the bounds (and within the time a load
 * of its size may take). Answers how many came back, or why none did.
 */
export async function loadVariables(
  channel: AgentChannel,
  file: string,
  { timeoutMs, signal }: LoadBounds = {},
): Promise<{ restored: number; error?: string; reason?: RestoreFailure }> {
  const { size } = await stat(file);
  const limit = Math.min(stateTimeoutMs(size), timeoutMs ?? Infinity);
  try {
    // Read in the chunks the channel sends, so that none is copied on the way.
    const source = createReadStream(file, { highWaterMark: STATE_CHUNK });
    return await channel.loadState(source, Math.max(1, Math.floor(limit)), signal);
  } catch (err) {
    if (err instanceof AgentUnanswered) {
      return err.why === 'cancelled'
        ? { restored: 0, error: 'the run was cancelled before the variables had loaded', reason: 'cancelled' }
        : {
            restored: 0,
            error:
              `the variables did not load within ${Math.round(limit)} ms` +
              (timeoutMs !== undefined && timeoutMs <= stateTimeoutMs(size) ? " (the run's time limit)" : ''),
            reason: 'load_timeout',
          };
    }
    return { restored: 0, error: (err as Error).message, reason: 'load_failed' };
  }
}

/**
 * After a session's sandbox was made for a run or a resume: a stateful session's saved variables (a pause, a fork, a
 * restore left them) are loaded into its new interpreter, then dropped from the store (the interpreter holds them
 * now). Answers what came back, for the `resumed` event: null for a process session. A load that did not end well
 * (`failed`) leaves the interpreter in no known state: the caller replaces the sandbox. Variables that failed to load
 * or did not load in time are dropped too, so that the session goes on (the next load would fail as this one did);
 * those of a cancelled run are kept for the next.
 */
export async function restoreVariables(
  settings: SessionStateSettings,
  sandbox: HeldSandbox,
  sessionId: string,
  stateful: boolean,
  log: BackendLogger,
  bounds: LoadBounds = {},
): Promise<Restored | null> {
  if (!stateful) return null;
  const file = settings.copies.stateFile(sessionId);
  const size = await settings.copies.stateBytes(sessionId);
  if (size === 0) return { restored: 0, unsaved: [] };
  const loaded = await loadVariables(sandbox.channel, file, bounds);
  const unsaved = await settings.copies.unsavedOf(sessionId);
  if (loaded.reason !== undefined) {
    log.warn({ sessionId, err: loaded.error, reason: loaded.reason }, 'the saved variables could not be loaded');
    if (loaded.reason !== 'cancelled') await settings.copies.removeState(sessionId);
    return {
      restored: 0,
      unsaved,
      error: loaded.error ?? 'the variables could not be loaded',
      reason: loaded.reason,
      failed: loaded.reason,
    };
  }
  await settings.copies.removeState(sessionId);
  return { restored: loaded.restored, unsaved };
}

/** The `resumed` event's variables, without what is for the worker alone. */
export const publicVariables = (restored: Restored | null): ResumedEvent['variables'] => {
  if (restored === null) return null;
  const { failed: _failed, ...rest } = restored;
  return rest;
};

/** How long a save of at most `settings.maxStateBytes` may take: the setting, and no longer than such a save needs. */
const saveTimeoutOf = (settings: SessionStateSettings): number =>
  Math.max(1, Math.min(settings.saveTimeoutMs, stateTimeoutMs(settings.maxStateBytes)));

/**
 * What is answered for variables whose save did not end in time: none is kept, and the interpreter, still running the
 * session's code that held the save up, is ended with its sandbox.
 */
const saveTimedOut = (timeoutMs: number): SavedVariables => ({
  saved: 0,
  unsaved: [],
  size_bytes: 0,
  reason: 'save_timeout',
  error:
    `the variables were not saved within ${Math.round(timeoutMs / 1000)} s (SANDGATE_STATE_SAVE_TIMEOUT_S): the ` +
    "session's code that saving runs (a __getstate__ or __reduce__) did not return; none is kept and the " +
    'interpreter was ended',
});

/**
 * Saves the live interpreter's variables to `file` within the save timeout. A save that does not end in time (the
 * session's own code holding it up) leaves the interpreter in no known state: its sandbox is ended, and the answer
 * says so (`reason: save_timeout`, nothing saved). Any other failure (too large, the agent gone) is thrown.
 */
async function saveBounded<S extends HeldSandbox>(
  host: SessionHost<S>,
  settings: SessionStateSettings,
  sandbox: S,
  file: string,
): Promise<SavedVariables> {
  const timeoutMs = saveTimeoutOf(settings);
  try {
    return await saveVariables(sandbox.channel, file, settings.maxStateBytes, { timeoutMs });
  } catch (err) {
    if (!(err instanceof AgentUnanswered && err.why === 'timeout')) throw err;
    await discard(host, sandbox);
    return saveTimedOut(timeoutMs);
  }
}

/**
 * Pauses a session: a stateful interpreter's variables are saved (unless `discard`), then its sandbox is removed.
 * Answers what was saved; null for a process session, or a stateful one with no sandbox (nothing live to save). A save
 * that does not end within the save timeout pauses the session all the same, without its variables.
 */
export async function pauseInHost<S extends HeldSandbox>(
  host: SessionHost<S>,
  settings: SessionStateSettings,
  target: SessionTarget,
  discard: boolean,
): Promise<SavedVariables | null> {
  let saved: SavedVariables | null = null;
  // A save that fails otherwise (too large, the agent gone) leaves the session as it is, sandbox and all.
  if (target.stateful && !discard) {
    const sandbox = await host.find(target.sessionId);
    if (sandbox !== undefined) {
      try {
        saved = await saveBounded(host, settings, sandbox, settings.copies.stateFile(target.sessionId));
        if (saved.reason === undefined) await settings.copies.noteUnsaved(target.sessionId, saved.unsaved);
        else await settings.copies.removeState(target.sessionId);
      } finally {
        host.release(sandbox);
      }
    }
  }
  await host.remove(target.sessionId);
  return saved;
}

/**
 * Saves a live stateful interpreter's variables to `file` without stopping it (a fork's or a snapshot's copy);
 * null when the session has no live sandbox (its saved state, if any, is in the store already). A save that does not
 * end in time ends the sandbox (its interpreter is stuck in the session's code) and answers `reason: save_timeout`,
 * with no file written: the copy then holds the files only.
 */
export async function checkpointInHost<S extends HeldSandbox>(
  host: SessionHost<S>,
  settings: SessionStateSettings,
  sessionId: string,
  file: string,
): Promise<SavedVariables | null> {
  const sandbox = await host.find(sessionId);
  if (sandbox === undefined) return null;
  try {
    return await saveBounded(host, settings, sandbox, file);
  } finally {
    host.release(sandbox);
  }
}

/**
 * Before a run: keeps an undo step of the session's files (and, with `undo: "state"`, of its live interpreter's
 * variables), then drops the oldest past the depth, in the background. A failure costs the undo step, not the run;
 * but a save of the variables that did not end within the bounds (a __getstate__ of the session's that never returns)
 * leaves the interpreter in no known state: that is answered, and the caller ends the sandbox and the run.
 */
export async function keepUndoStep(
  settings: SessionStateSettings,
  job: ExecutionJob,
  channel: AgentChannel | undefined,
  log: BackendLogger,
  bounds: LoadBounds = {},
): Promise<AgentUnanswered | undefined> {
  if (job.undo === undefined || settings.undoDepth === 0 || settings.copies.kind !== 'snapshot') return undefined;
  const { copies } = settings;
  let unanswered: AgentUnanswered | undefined;
  try {
    const steps = await copies.undoSteps(job.session_id);
    const step = await copies.keepUndo(job.session_id, job.execution_id, steps);
    if (job.undo === 'state' && channel !== undefined) {
      const timeoutMs = Math.min(stateTimeoutMs(settings.maxStateBytes), bounds.timeoutMs ?? Infinity);
      await saveVariables(channel, copies.undoStateFile(step), settings.maxStateBytes, {
        timeoutMs: Math.max(1, Math.floor(timeoutMs)),
        ...(bounds.signal ? { signal: bounds.signal } : {}),
      }).catch((err: unknown) => {
        if (err instanceof AgentUnanswered) unanswered = err;
        log.warn({ sessionId: job.session_id, err }, 'the undo step keeps the files only');
      });
    }
    void copies
      .pruneUndo(job.session_id, settings.undoDepth, [step, ...steps])
      .catch((err: unknown) => log.warn({ sessionId: job.session_id, err }, 'could not drop old undo steps'));
  } catch (err) {
    log.warn({ sessionId: job.session_id, err }, 'no undo step kept before this run');
  }
  return unanswered;
}

/**
 * Brings a paused session back without a run (POST …/resume): its sandbox made as a run of `job` would make it, its
 * files brought in where the sandbox's workspace is its own, a stateful session's variables loaded. Variables that do
 * not load leave a fresh sandbox in its place, and the answer says why.
 */
export async function resumeInHost<S extends HeldSandbox>(
  host: SessionHost<S>,
  settings: SessionStateSettings,
  job: ExecutionJob,
  dir: string,
  log: BackendLogger,
): Promise<ResumedEvent['variables']> {
  const bringUp = async (): Promise<S> => {
    const sandbox = await host.acquire(job, dir).catch((err: unknown) => {
      throw host.failure(err);
    });
    sandbox.created = false;
    return sandbox;
  };
  const sandbox = await bringUp();
  let restored: Restored | null;
  try {
    await host.prepare?.(sandbox, job, dir);
    restored = await restoreVariables(settings, sandbox, job.session_id, job.sandbox === 'stateful', log);
    if (restored?.failed !== undefined) await discard(host, sandbox);
  } finally {
    host.release(sandbox);
  }
  if (restored?.failed !== undefined) {
    const fresh = await bringUp();
    try {
      await host.prepare?.(fresh, job, dir);
    } finally {
      host.release(fresh);
    }
  }
  return publicVariables(restored);
}

/** Ends a sandbox whose interpreter is in no known state (a load or a save that never ended): acquire replaces it. */
export async function discard<S extends HeldSandbox>(host: SessionHost<S>, sandbox: S): Promise<void> {
  await host.kill(sandbox).catch(() => {});
  sandbox.channel.close();
}
