import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import type { SubvolumeQuota } from '@sandgate/storage';
import type { EventSink } from '../backend.ts';
import { runInAgent, type Death } from '../agent/agent-run.ts';
import type { ArtifactStore, TransferFailure } from '../artifacts/artifact-store.ts';
import { ToolBroker, type ToolSettings } from '../run/tool-broker.ts';
import type { BackendLogger } from '../logger.ts';
import type { PoolMember, SandboxPool } from './sandbox-pool.ts';

export interface PooledRunContext {
  /** A reset takes milliseconds; one that takes longer is fighting something the run left, and loses the sandbox. */
  resetTimeoutMs: number;
  maxOutputBytes: number;
  quota?: SubvolumeQuota;
  artifacts: ArtifactStore;
  /** The tools runs may call (sandgate.tools), by tenant. */
  tools?: ToolSettings;
  log: BackendLogger;
}

/** What differs between backends in a pooled run: how the sandbox gets the run's files and limits, and loses them. */
export interface PooledRunHooks {
  /** Gives the sandbox the job's limits and the session's files; throwing sends the run elsewhere (`fallBack`). */
  prepare(): Promise<void>;
  /** The sandbox could not be used before the code started. */
  fallBack(err: unknown): void;
  kill(): Promise<void>;
  /** How the sandbox ended when it stopped mid-run. */
  death(): Promise<Death>;
  /** Where the sandbox's workspace is its own: brings the run's files back (see runInAgent). */
  collect?(): Promise<{ failed: TransferFailure[] }>;
  /** After a proved reset: moves what is left of the session out; false when the sandbox cannot serve again. */
  handBack?(): Promise<boolean>;
}

/**
 * Runs a one-shot job in a warm sandbox of `pool`. Afterwards the sandbox goes back to the pool for its tenant if the
 * run ended on its own and the agent then proved a reset; otherwise it is removed like a cold one. Undefined when the
 * sandbox could not be used before the code started: the caller then runs it cold.
 */
export async function runPooled<T extends PoolMember>(
  pool: SandboxPool<T>,
  sandbox: T,
  ctx: PooledRunContext,
  hooks: PooledRunHooks,
  run: { job: ExecutionJob; dir: string; events: EventSink; signal: AbortSignal },
): Promise<ExecutionResult | undefined> {
  const { job } = run;
  const fallBack = (err: unknown): undefined => {
    pool.recordFallback();
    hooks.fallBack(err);
    ctx.log.warn({ executionId: job.execution_id, err }, 'warm sandbox unusable; running cold');
    return undefined;
  };
  let recycled = false;
  try {
    try {
      await hooks.prepare();
    } catch (err) {
      return fallBack(err);
    }
    sandbox.runs++;
    sandbox.tenant = job.tenant;
    let reset = false;
    const outcome = await runInAgent({
      ...run,
      channel: sandbox.channel,
      mode: 'process',
      // A one-shot has no state worth an interrupt: a timeout or cancel kills the sandbox, as a cold one.
      interruptGraceMs: 0,
      maxOutputBytes: ctx.maxOutputBytes,
      quota: ctx.quota,
      artifacts: ctx.artifacts,
      tools: ToolBroker.of(ctx.tools, job.tenant, run.events),
      kill: () => hooks.kill(),
      postMortem: async () => {
        const death = await hooks.death();
        return { ...death, message: `The sandbox stopped during this run (exit status ${death.exitCode}).` };
      },
      ...(hooks.collect ? { collect: () => hooks.collect!() } : {}),
      quiesce: async () => {
        if (!pool.reusable(sandbox)) return;
        try {
          await sandbox.channel.reset(ctx.resetTimeoutMs);
          reset = true;
        } catch (err) {
          ctx.log.warn(
            { executionId: job.execution_id, sandbox: sandbox.name, err },
            'pool sandbox could not be reset; it is removed',
          );
          pool.recordResetFailure();
          // Whatever the run left behind must not write on while its files are harvested.
          await hooks.kill().catch(() => {});
        }
      },
    });
    if (!outcome.started && outcome.retryable)
      return fallBack(new Error('the warm sandbox stopped before it took the run'));
    if (reset) recycled = hooks.handBack ? await hooks.handBack() : true;
    ctx.log.info(
      {
        executionId: job.execution_id,
        sandbox: 'pool',
        run: sandbox.runs,
        recycled,
        state: outcome.result.state,
        durationMs: outcome.result.duration_ms,
      },
      'execution finished',
    );
    return outcome.result;
  } finally {
    if (recycled) pool.recycle(sandbox);
    else pool.release(sandbox);
  }
}
