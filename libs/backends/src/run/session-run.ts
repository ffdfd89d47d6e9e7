import type { ExecutionJob, ExecutionResult, ResumedEvent } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import type { SubvolumeQuota, Volumes } from '@sandgate/storage';
import type { AgentChannel } from '../agent/agent-channel.ts';
import type { BackendLogger } from '../logger.ts';
import { runInAgent, type AgentOutcome, type Death } from '../agent/agent-run.ts';
import { fullVolume } from '../outcome/result.ts';
import type { ArtifactStore, TransferFailure } from '../artifacts/artifact-store.ts';
import { ToolBroker, type ToolSettings } from './tool-broker.ts';
import { keepUndoStep, restoreVariables, type SessionStateSettings } from './session-state.ts';

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
  for (let attempt = 1; ; attempt++) {
    const acquiredFrom = Date.now();
    const sandbox = await host.acquire(job, dir).catch((err: unknown) => {
      throw host.failure(err);
    });
    const created = sandbox.created === true;
    sandbox.created = false;
    let outcome: AgentOutcome;
    const startedAt = Date.now();
    try {
      if (created && ctx.state !== undefined) {
        // A new sandbox: a stateful session's saved variables (a pause, a fork, a restore kept them) come back.
        const variables = await restoreVariables(
          ctx.state,
          sandbox,
          job.session_id,
          job.sandbox === 'stateful',
          ctx.log,
        );
        if (job.paused_at !== undefined && resumed === undefined) {
          resumed = {
            paused_at: new Date(job.paused_at).toISOString(),
            duration_ms: Date.now() - acquiredFrom,
            variables,
          };
          events.resumed?.(resumed);
        }
      }
      if (ctx.state !== undefined && attempt === 1) {
        await keepUndoStep(ctx.state, job, stateful ? sandbox.channel : undefined, ctx.log);
      }
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
        ...(ctx.volumes && job.volumes?.length ? { volumesFull: () => fullVolume(job, ctx.volumes!) } : {}),
        artifacts: ctx.artifacts,
        tools: ToolBroker.of(ctx.tools, job.tenant, events),
        kill: () => host.kill(sandbox),
        postMortem: () => postMortem(ctx, job, sandbox, startedAt),
        ...(host.prepare ? { prepare: () => host.prepare!(sandbox, job, dir) } : {}),
        ...(host.collect ? { collect: () => host.collect!(sandbox, job, dir) } : {}),
      });
    } finally {
      host.release(sandbox);
    }
    if (!outcome.started && outcome.retryable) {
      if (attempt < 2) continue;
      throw host.failure(new Error('the session sandbox stopped before it could take the run, twice'));
    }
    const result = outcome.result;
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
