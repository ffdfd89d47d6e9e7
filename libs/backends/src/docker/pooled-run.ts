import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import type { SubvolumeQuota } from '@sandgate/storage';
import type { BackendLogger } from '../shared/logger.ts';
import { runInAgent } from '../shared/agent-run.ts';
import { deathOf } from './sandbox-death.ts';
import { resources } from './container-spec.ts';
import { adoptWorkspace, releaseWorkspace, type SlotDirs } from './pool-dirs.ts';
import type { PooledSandbox, WarmPool } from './warm-pool.ts';

export interface PooledRunContext {
  pool: WarmPool;
  slots: SlotDirs;
  /** A reset takes milliseconds; one that takes longer is fighting something the run left, and loses the sandbox. */
  resetTimeoutMs: number;
  maxOutputBytes: number;
  quota?: SubvolumeQuota;
  artifactUrl: (sessionId: string, path: string) => string;
  log: BackendLogger;
}

/**
 * Runs a one-shot job in a warm sandbox. Afterwards the sandbox goes back to the pool if the run ended on its own
 * and the agent then proved a reset, with the session's files moved out of it; otherwise it is removed like a cold
 * one. Undefined when the sandbox could not be used before the code started (the caller then goes cold; the files
 * are in the session directory either way).
 */
export async function runPooled(
  ctx: PooledRunContext,
  sandbox: PooledSandbox,
  job: ExecutionJob,
  dir: string,
  events: EventSink,
  signal: AbortSignal,
): Promise<ExecutionResult | undefined> {
  let recycled = false;
  try {
    try {
      await prepare(ctx, sandbox, job, dir);
    } catch (err) {
      fallBack(ctx, job, err);
      return undefined;
    }
    sandbox.runs++;
    sandbox.tenant = job.tenant;
    let reset = false;
    const { container } = sandbox;
    const kill = async (): Promise<void> => {
      await container.kill({ signal: 'SIGKILL' });
    };
    const startedAt = Date.now();
    const outcome = await runInAgent({
      job,
      events,
      signal,
      dir,
      channel: sandbox.channel,
      mode: 'process',
      // A one-shot has no state worth an interrupt: a timeout or cancel kills the sandbox, as a cold one.
      interruptGraceMs: 0,
      maxOutputBytes: ctx.maxOutputBytes,
      quota: ctx.quota,
      artifactUrl: ctx.artifactUrl,
      kill,
      postMortem: async () => {
        const death = await deathOf(container, kill, startedAt);
        return { ...death, message: `The sandbox stopped during this run (exit status ${death.exitCode}).` };
      },
      quiesce: async () => {
        if (!ctx.pool.reusable(sandbox)) return;
        reset = await resetSandbox(ctx, sandbox, job);
        // Whatever the run left behind must not write on while its files are harvested.
        if (!reset) await kill().catch(() => {});
      },
    });
    if (!outcome.started && outcome.retryable) {
      fallBack(ctx, job, new Error('the warm sandbox stopped before it took the run'));
      return undefined;
    }
    if (reset) recycled = await handBack(ctx, sandbox, job, dir);
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
    if (recycled) ctx.pool.recycle(sandbox);
    else ctx.pool.release(sandbox);
  }
}

/**
 * Gives the sandbox the job's limits and the session's files. Limits other than the sandbox's are set with `docker
 * update` (gVisor cannot: the run then goes cold). The pool keeps making sandboxes with the deployment's limits: one
 * tenant's request never becomes every later run's starting point.
 */
async function prepare(ctx: PooledRunContext, sandbox: PooledSandbox, job: ExecutionJob, dir: string): Promise<void> {
  const want = resources(job);
  const has = resources(sandbox.limits);
  if (want.Memory !== has.Memory || want.NanoCpus !== has.NanoCpus) {
    await sandbox.container.update(want);
    sandbox.limits = { memory_mb: job.memory_mb, cpus: job.cpus };
  }
  await adoptWorkspace(dir, sandbox.slotDir, ctx.slots.quota);
}

async function resetSandbox(ctx: PooledRunContext, sandbox: PooledSandbox, job: ExecutionJob): Promise<boolean> {
  try {
    await sandbox.channel.reset(ctx.resetTimeoutMs);
    return true;
  } catch (err) {
    ctx.log.warn(
      { executionId: job.execution_id, container: sandbox.name, err },
      'pool sandbox could not be reset; it is removed',
    );
    ctx.pool.recordResetFailure();
    return false;
  }
}

/** Moves the session's files out of the sandbox, which may then serve again; false if they could not all move. */
async function handBack(
  ctx: PooledRunContext,
  sandbox: PooledSandbox,
  job: ExecutionJob,
  dir: string,
): Promise<boolean> {
  // Under disk quotas the slot's subvolume is the session's now, and files cannot move out of it by rename: the
  // sandbox serves this one run, and the pool makes a fresh one.
  if (ctx.slots.quota) return false;
  try {
    await releaseWorkspace(dir, sandbox.slotDir, ctx.slots);
    return true;
  } catch (err) {
    ctx.log.warn(
      { executionId: job.execution_id, container: sandbox.name, err },
      'could not move the session out of a pool sandbox; it is removed',
    );
    return false;
  }
}

function fallBack(ctx: PooledRunContext, job: ExecutionJob, err: unknown): void {
  ctx.pool.recordFallback();
  // Slot and session directories on different filesystems: no rename will ever work, so stop pooling.
  if ((err as NodeJS.ErrnoException).code === 'EXDEV')
    ctx.pool.disable('the pool and session directories are on different filesystems');
  ctx.log.warn({ executionId: job.execution_id, err }, 'warm sandbox unusable; running cold');
}
