import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import { runPooled, type PooledRunContext } from '../pool/pooled-run.ts';
import { deathOf } from './sandbox-death.ts';
import { resources } from './container-spec.ts';
import { adoptWorkspace, releaseSubvolume, releaseWorkspace, type SlotDirs } from './pool-dirs.ts';
import type { PooledSandbox, WarmPool } from './warm-pool.ts';

export interface DockerPooledRunContext extends PooledRunContext {
  pool: WarmPool;
  slots: SlotDirs;
}

/**
 * Runs a one-shot job in a warm container (runPooled): the session's directory becomes the container's /mnt/data
 * (a rename of its slot), and moves back out after a proved reset. Undefined when the container could not be used
 * (the caller then goes cold; the files are in the session directory either way).
 */
export function runPooledContainer(
  ctx: DockerPooledRunContext,
  sandbox: PooledSandbox,
  job: ExecutionJob,
  dir: string,
  events: EventSink,
  signal: AbortSignal,
): Promise<ExecutionResult | undefined> {
  const kill = async (): Promise<void> => {
    await sandbox.container.kill({ signal: 'SIGKILL' });
  };
  const startedAt = Date.now();
  return runPooled(
    ctx.pool,
    sandbox,
    ctx,
    {
      prepare: () => prepare(ctx, sandbox, job, dir),
      fallBack: (err) => {
        // Slot and session directories on different filesystems: no rename will ever work, so stop pooling.
        if ((err as NodeJS.ErrnoException).code === 'EXDEV')
          ctx.pool.disable('the pool and session directories are on different filesystems');
      },
      kill,
      death: () => deathOf(sandbox.container, kill, startedAt),
      handBack: () => handBack(ctx, sandbox, job, dir),
    },
    { job, dir, events, signal },
  );
}

/**
 * Gives the sandbox the job's limits and the session's files. Limits other than the sandbox's are set with `docker
 * update` (gVisor cannot: the run then goes cold). The pool keeps making sandboxes with the deployment's limits: one
 * tenant's request never becomes every later run's starting point.
 */
async function prepare(
  ctx: DockerPooledRunContext,
  sandbox: PooledSandbox,
  job: ExecutionJob,
  dir: string,
): Promise<void> {
  const want = resources(job);
  const has = resources(sandbox.limits);
  if (want.Memory !== has.Memory || want.NanoCpus !== has.NanoCpus) {
    await sandbox.container.update(want);
    sandbox.limits = { memory_mb: job.memory_mb, cpus: job.cpus };
  }
  await adoptWorkspace(dir, sandbox.slotDir, ctx.slots.quota);
}

/** Moves the session's files out of the sandbox, which may then serve again; false if they could not all move. */
async function handBack(
  ctx: DockerPooledRunContext,
  sandbox: PooledSandbox,
  job: ExecutionJob,
  dir: string,
): Promise<boolean> {
  try {
    if (ctx.slots.quota) await releaseSubvolume(dir, sandbox.slotDir, ctx.slots.quota);
    else await releaseWorkspace(dir, sandbox.slotDir, ctx.slots);
    return true;
  } catch (err) {
    ctx.log.warn(
      { executionId: job.execution_id, container: sandbox.name, err },
      'could not move the session out of a pool sandbox; it is removed',
    );
    return false;
  }
}
