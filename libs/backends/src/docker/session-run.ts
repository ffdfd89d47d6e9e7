import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import type { SubvolumeQuota } from '@sandgate/storage';
import type { BackendLogger } from '../shared/logger.ts';
import { deathOf, runInAgent, type AgentOutcome, type Death } from './agent-execution.ts';
import { engineError } from './engine-errors.ts';
import type { SessionSandbox, SessionSandboxes } from './session-sandboxes.ts';

export interface SessionRunContext {
  sessions: SessionSandboxes;
  /** The runtime image, for error messages. */
  image: string;
  maxOutputBytes: number;
  quota?: SubvolumeQuota;
  interruptGraceMs: number;
  artifactUrl: (sessionId: string, path: string) => string;
  log: BackendLogger;
}

/**
 * Runs a job in its session's long-lived sandbox: a new process (`session`) or a cell of the session's live
 * interpreter (`stateful`). A sandbox found dead before it took the run is replaced and the run sent again, once.
 */
export async function runInSession(
  ctx: SessionRunContext,
  job: ExecutionJob,
  dir: string,
  events: EventSink,
  signal: AbortSignal,
): Promise<ExecutionResult> {
  // Only python has a live interpreter; anything else in a stateful session is a new process, as in `session`.
  const stateful = job.sandbox === 'stateful' && job.language === 'python';
  for (let attempt = 1; ; attempt++) {
    const sandbox = await ctx.sessions.acquire(job, dir).catch((err: unknown) => {
      throw engineError(err, ctx.image);
    });
    let outcome: AgentOutcome;
    const startedAt = Date.now();
    try {
      outcome = await runInAgent({
        job,
        events,
        signal,
        dir,
        channel: sandbox.channel,
        mode: stateful ? 'stateful' : 'process',
        interruptGraceMs: ctx.interruptGraceMs,
        maxOutputBytes: ctx.maxOutputBytes,
        quota: ctx.quota,
        artifactUrl: ctx.artifactUrl,
        kill: () => ctx.sessions.kill(sandbox.container),
        postMortem: () => postMortem(ctx, job, sandbox, startedAt),
      });
    } finally {
      ctx.sessions.release(sandbox);
    }
    if (!outcome.started && outcome.retryable) {
      if (attempt < 2) continue;
      throw engineError(new Error('the session sandbox stopped before it could take the run, twice'), ctx.image);
    }
    const result = outcome.result;
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

/**
 * How a session sandbox that stopped mid-run ended. It is left stopped: the next run replaces it and reports the
 * restart.
 */
async function postMortem(
  ctx: SessionRunContext,
  job: ExecutionJob,
  sandbox: SessionSandbox,
  sinceMs: number,
): Promise<Death & { message: string }> {
  const kill = () => ctx.sessions.kill(sandbox.container);
  const { exitCode, oomKilled, engineStopped } = await deathOf(sandbox.container, kill, sinceMs);
  const what = job.sandbox === 'stateful' ? 'The Python interpreter of this session' : 'The session sandbox';
  const after =
    job.sandbox === 'stateful'
      ? 'its variables are gone; the next run starts a fresh interpreter'
      : 'the next run starts a fresh sandbox';
  ctx.log.warn(
    { executionId: job.execution_id, sessionId: job.session_id, exitCode, oomKilled },
    'session sandbox died mid-run',
  );
  const message = `${what} died during this run (exit status ${exitCode}); ${after}.`;
  return { exitCode, oomKilled, engineStopped, message };
}
