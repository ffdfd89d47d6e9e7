import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import type { BackendLogger } from '../shared/logger.ts';
import { deathOf, runInAgent } from './agent-execution.ts';
import { resources } from './container-spec.ts';
import { adoptWorkspace } from './pool-dirs.ts';
import type { PooledSandbox, WarmPool } from './warm-pool.ts';

export interface PooledRunContext {
  pool: WarmPool;
  maxOutputBytes: number;
  artifactUrl: (sessionId: string, path: string) => string;
  log: BackendLogger;
}

/**
 * Runs a one-shot job in a warm sandbox, which is removed afterwards like a cold one. Undefined when the sandbox
 * could not be used before the code started (the caller then goes cold; the files are in the session directory
 * either way).
 */
export async function runPooled(ctx: PooledRunContext, sandbox: PooledSandbox, job: ExecutionJob, dir: string, events: EventSink, signal: AbortSignal): Promise<ExecutionResult | undefined> {
  try {
    try {
      await prepare(ctx, sandbox, job, dir);
    } catch (err) {
      fallBack(ctx, job, err);
      return undefined;
    }
    const { container } = sandbox;
    const kill = async (): Promise<void> => { await container.kill({ signal: 'SIGKILL' }); };
    const outcome = await runInAgent({
      job, events, signal, dir, channel: sandbox.channel, mode: 'process',
      // A single-use sandbox has no state worth an interrupt: a timeout or cancel kills it, as a cold one.
      interruptGraceMs: 0,
      maxOutputBytes: ctx.maxOutputBytes,
      artifactUrl: ctx.artifactUrl,
      kill,
      postMortem: async () => {
        const death = await deathOf(container, kill);
        return { ...death, message: `The sandbox stopped during this run (exit status ${death.exitCode}).` };
      },
    });
    if (!outcome.started && outcome.retryable) {
      fallBack(ctx, job, new Error('the warm sandbox stopped before it took the run'));
      return undefined;
    }
    ctx.log.info({ executionId: job.execution_id, sandbox: 'pool', state: outcome.result.state, durationMs: outcome.result.duration_ms }, 'execution finished');
    return outcome.result;
  } finally {
    ctx.pool.release(sandbox);
  }
}

/**
 * Gives the sandbox the job's limits and the session's files. Limits other than the pool's are set with `docker
 * update` (gVisor cannot: the run then goes cold), and the pool makes its next sandboxes with them.
 */
async function prepare(ctx: PooledRunContext, sandbox: PooledSandbox, job: ExecutionJob, dir: string): Promise<void> {
  const want = resources(job);
  const has = resources(sandbox.limits);
  if (want.Memory !== has.Memory || want.NanoCpus !== has.NanoCpus) {
    ctx.pool.retarget(job);
    await sandbox.container.update(want);
  }
  await adoptWorkspace(dir, sandbox.slotDir);
}

function fallBack(ctx: PooledRunContext, job: ExecutionJob, err: unknown): void {
  ctx.pool.recordFallback();
  // Slot and session directories on different filesystems: no rename will ever work, so stop pooling.
  if ((err as NodeJS.ErrnoException).code === 'EXDEV') ctx.pool.disable('the pool and session directories are on different filesystems');
  ctx.log.warn({ executionId: job.execution_id, err }, 'warm sandbox unusable; running cold');
}
