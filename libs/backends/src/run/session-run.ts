import type { ExecutionJob, ExecutionResult, ResumedEvent } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import type { SubvolumeQuota, Volumes } from '@sandgate/storage';
import type { AgentChannel } from '../agent/agent-channel.ts';
import type { BackendLogger } from '../logger.ts';
import { runInAgent, type AgentOutcome, type Death } from '../agent/agent-run.ts';
import { buildResult, fullVolume } from '../outcome/result.ts';
import type { ArtifactStore, TransferFailure } from '../artifacts/artifact-store.ts';
import { ToolBroker, type ToolSettings } from './tool-broker.ts';
import {
  discard,
  keepUndoStep,
  publicVariables,
  restoreVariables,
  type Restored,
  type SessionStateSettings,
} from './session-state.ts';

/** A session's sandbox, held for one run. */
export interface HeldSandbox {
  channel: AgentChannel;
  /** It took the place of an earlier sandbox of this session: its first interpreter is a restart. */
  replaces: boolean;
  /** It was made for this acquire (a new sandbox): a paused session comes back in one. */
  created?: boolean;
}

/** Where sessions' long-lived sandboxes come from: Docker containers, or Kubernetes session Pods. */
export interface SessionHost<S extends HeldSandbox> {
  /** The session's running sandbox, made or replaced as needed, with the job's limits and generation. */
  acquire(job: ExecutionJob, dir: string): Promise<S>;
  /** Done with a run: the connection is kept for the session's next run, unless the sandbox ended. */
  release(sandbox: S): void;
  /** The session's sandbox if one is running and answers, connected; none is made. */
  find(sessionId: string): Promise<S | undefined>;
  /** Removes the session's sandbox, if it has one (a pause: no container or Pod left, the files kept). */
  remove(sessionId: string): Promise<void>;
  /** Ends a sandbox whose run could not be ended otherwise; the next run replaces it and reports the restart. */
  kill(sandbox: S): Promise<void>;
  /** How a sandbox that stopped mid-run ended. */
  death(sandbox: S, job: ExecutionJob, sinceMs: number): Promise<Death>;
  /** The error a failure to get a sandbox becomes (engine or cluster unavailable, image missing …). */
  failure(err: unknown): Error;
  /** Where the sandbox's workspace is its own: moves the session's files in before a run and back after it. */
  prepare?(sandbox: S, job: ExecutionJob, dir: string): Promise<void>;
  collect?(sandbox: S, job: ExecutionJob, dir: string): Promise<{ failed: TransferFailure[]; diskQuota?: string }>;
}

export interface SessionRunContext<S extends HeldSandbox> {
  sessions: SessionHost<S>;
  maxOutputBytes: number;
  quota?: SubvolumeQuota;
  /** The volumes' directories, where sandboxes write to them in place (Docker): a full one explains a failed run. */
  volumes?: Volumes;
  interruptGraceMs: number;
  artifacts: ArtifactStore;
  /** The tools runs may call (sandgate.tools), by tenant. */
  tools?: ToolSettings;
  /** Where sessions' saved variables and undo steps are kept; absent: neither is. */
  state?: SessionStateSettings;
  log: BackendLogger;
}

/**
 * Runs a job in its session's long-lived sandbox: a new process (`session`) or a cell of the session's live
 * interpreter (`stateful`). A sandbox found dead before it took the run is replaced and the run sent again, once.
 */
export async function runInSession<S extends HeldSandbox>(
  ctx: SessionRunContext<S>,
  job: ExecutionJob,
  dir: string,
  events: EventSink,
  signal: AbortSignal,
): Promise<ExecutionResult> {
  // Only python has a live interpreter; anything else in a stateful session is a new process, as in `session`, and so
  // is a test run.
  const stateful = job.sandbox === 'stateful' && job.language === 'python' && job.mode !== 'test';
  const host = ctx.sessions;
  let resumed: ResumedEvent | undefined;
  // What came before the code (saved variables loaded, an undo step's save) counts within the run's time limit.
  let spentMs = 0;
  const left = (): number => job.timeout_ms - spentMs;
  for (let attempt = 1; ; attempt++) {
    const acquiredFrom = Date.now();
    const sandbox = await host.acquire(job, dir).catch((err: unknown) => {
      throw host.failure(err);
    });
    const created = sandbox.created === true;
    sandbox.created = false;
    let outcome: AgentOutcome;
    let before: Before | undefined;
    const startedAt = Date.now();
    try {
      before = await beforeRun(ctx, job, sandbox, created, stateful, signal, left, (ms) => (spentMs += ms));
      // A paused session came back; or a live one's saved variables (kept by a cancelled run) were loaded.
      const loaded = before.restored != null && (before.restored.failed !== undefined || before.restored.restored > 0);
      if (before.restored !== undefined && (job.paused_at !== undefined || loaded) && resumed === undefined) {
        resumed = {
          paused_at: job.paused_at === undefined ? null : new Date(job.paused_at).toISOString(),
          duration_ms: Date.now() - acquiredFrom,
          variables: publicVariables(before.restored),
        };
        events.resumed?.(resumed);
      }
      if (!before.go) {
        await discard(host, sandbox);
        outcome = { started: false, retryable: before.stopped === undefined, result: notRun(job, before.stopped) };
      } else {
        outcome = await runInAgent({
          job,
          timeoutMs: Math.max(1, left()),
          events,
          signal,
          dir,
          channel: sandbox.channel,
          mode: stateful ? 'stateful' : 'process',
          interruptGraceMs: ctx.interruptGraceMs,
          maxOutputBytes: ctx.maxOutputBytes,
          quota: ctx.quota,
          ...(ctx.volumes && job.volumes?.length ? { volumesFull: () => fullVolume(job, ctx.volumes!) } : {}),
          artifacts: ctx.artifacts,
          tools: ToolBroker.of(ctx.tools, job.tenant, events),
          kill: () => host.kill(sandbox),
          postMortem: () => postMortem(ctx, job, sandbox, startedAt),
          ...(host.prepare ? { prepare: () => host.prepare!(sandbox, job, dir) } : {}),
          ...(host.collect ? { collect: () => host.collect!(sandbox, job, dir) } : {}),
        });
      }
    } finally {
      host.release(sandbox);
    }
    // Variables that did not load: the sandbox went with them, and the run goes on in a fresh one (not an attempt).
    if (!outcome.started && before?.restored?.failed !== undefined && before.stopped === undefined) {
      attempt--;
      continue;
    }
    if (!outcome.started && outcome.retryable) {
      if (attempt < 2) continue;
      throw host.failure(new Error('the session sandbox stopped before it could take the run, twice'));
    }
    const result = outcome.result;
    if (before?.message !== undefined) result.message = before.message;
    if (resumed !== undefined) result.resumed = resumed;
    if (stateful) {
      const exit = outcome.started ? outcome.exit : undefined;
      // A fresh interpreter is a restart only where an earlier one existed: the first run of a session is not.
      result.interpreter_restarted = exit?.restarted === true && sandbox.replaces;
      if (exit?.value !== undefined && result.state === 'completed') result.value = exit.value;
    }
    ctx.log.info(
      {
        executionId: job.execution_id,
        sessionId: job.session_id,
        sandbox: job.sandbox,
        state: result.state,
        durationMs: result.duration_ms,
      },
      'execution finished',
    );
    return result;
  }
}

/** What happened before the code: variables loaded (`restored`), and whether the code may run now (`go`). */
interface Before {
  go: boolean;
  restored?: Restored | null;
  /** The run ended before its code: the time limit passed, or it was cancelled. */
  stopped?: 'timeout' | 'cancelled';
  /** Why, for people, where the result's own message would not say it. */
  message?: string;
}

/**
 * Before the code, in a sandbox made for this run: a stateful session's saved variables are loaded; before every run,
 * an undo step is kept. Both count within the run's time limit (`left`) and end on its cancel; either one that did not
 * end well leaves the interpreter in no known state, and the sandbox goes.
 */
async function beforeRun<S extends HeldSandbox>(
  ctx: SessionRunContext<S>,
  job: ExecutionJob,
  sandbox: S,
  created: boolean,
  stateful: boolean,
  signal: AbortSignal,
  left: () => number,
  spend: (ms: number) => void,
): Promise<Before> {
  const before: Before = { go: true };
  if (ctx.state === undefined) return before;
  const from = performance.now();
  try {
    if (created) {
      // A new sandbox: a stateful session's saved variables (a pause, a fork, a restore kept them) come back.
      const restored = await restoreVariables(ctx.state, sandbox, job.session_id, job.sandbox === 'stateful', ctx.log, {
        timeoutMs: left(),
        signal,
      });
      before.restored = restored;
      const failed = restored?.failed;
      if (failed !== undefined) {
        before.go = false;
        if (failed === 'cancelled' || signal.aborted) before.stopped = 'cancelled';
        else if (failed === 'load_timeout' && left() - (performance.now() - from) <= 0) {
          before.stopped = 'timeout';
          before.message =
            `The session's saved variables did not load within the ${job.timeout_ms} ms time limit, so the code did ` +
            'not run. They are dropped: the next run starts a fresh interpreter (the files are as they were).';
        }
        return before;
      }
    }
    const unanswered = await keepUndoStep(ctx.state, job, stateful ? sandbox.channel : undefined, ctx.log, {
      timeoutMs: left() - (performance.now() - from),
      signal,
    });
    if (unanswered !== undefined) {
      before.go = false;
      before.stopped = unanswered.why === 'cancelled' ? 'cancelled' : 'timeout';
      if (before.stopped === 'timeout') {
        before.message =
          `Saving the variables for undo did not end within the ${job.timeout_ms} ms time limit, so the code did ` +
          'not run; the interpreter was ended with its variables (a value whose saving does not end?).';
      }
    }
    return before;
  } finally {
    spend(performance.now() - from);
  }
}

/** The result of a run that ended before its code ran: at its time limit, or cancelled. */
function notRun(job: ExecutionJob, stopped: 'timeout' | 'cancelled' | undefined): ExecutionResult {
  const empty = { text: '', truncated: false };
  return buildResult({
    end: { exitCode: -1, timedOut: stopped === 'timeout', cancelled: stopped === 'cancelled', oomKilled: false },
    limits: job,
    stdout: empty,
    stderr: empty,
    artifacts: [],
    durationMs: 0,
  });
}

/**
 * How a session sandbox that stopped mid-run ended. It is left stopped: the next run replaces it and reports the
 * restart.
 */
async function postMortem<S extends HeldSandbox>(
  ctx: SessionRunContext<S>,
  job: ExecutionJob,
  sandbox: S,
  sinceMs: number,
): Promise<Death & { message: string }> {
  const death = await ctx.sessions.death(sandbox, job, sinceMs);
  const what = job.sandbox === 'stateful' ? 'The Python interpreter of this session' : 'The session sandbox';
  const after =
    job.sandbox === 'stateful'
      ? 'its variables are gone; the next run starts a fresh interpreter'
      : 'the next run starts a fresh sandbox';
  ctx.log.warn(
    { executionId: job.execution_id, sessionId: job.session_id, exitCode: death.exitCode, oomKilled: death.oomKilled },
    'session sandbox died mid-run',
  );
  const message = `${what} died during this run (exit status ${death.exitCode}); ${after}.`;
  return { ...death, message };
}
