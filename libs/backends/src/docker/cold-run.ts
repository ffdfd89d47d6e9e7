import type { ArtifactStore } from '../artifacts/artifact-store.ts';
import type Dockerode from 'dockerode';
import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import type { Harvest } from '../artifacts/artifacts.ts';
import type { BackendLogger } from '../logger.ts';
import { runOutput } from '../run/run-output.ts';
import { buildResult, withDiskQuota, type RunEnd } from '../outcome/result.ts';
import type { SubvolumeQuota } from '@sandgate/storage';
import { containerName, containerSpec, type SandboxSettings } from './container-spec.ts';
import { engineError, forceRemove, statusOf } from './engine-errors.ts';
import { runContainer } from './run-container.ts';

export interface ColdRunContext {
  docker: Dockerode;
  settings: SandboxSettings;
  maxOutputBytes: number;
  /** Per-session disk quota, where the data directory enforces one: a failure at it gets reason disk_quota. */
  quota?: SubvolumeQuota;
  artifacts: ArtifactStore;
  log: BackendLogger;
}

/**
 * Runs a one-shot job in a container of its own, created for it with the code as its command and removed after:
 * no agent in between, so a run without a warm sandbox costs what the engine costs.
 */
export async function runCold(
  ctx: ColdRunContext,
  job: ExecutionJob,
  dir: string,
  events: EventSink,
  signal: AbortSignal,
): Promise<ExecutionResult> {
  const before = await ctx.artifacts.snapshot(dir);
  const { stdout, stderr, tests } = runOutput(events, ctx.maxOutputBytes, job);
  const container = await create(ctx, job, dir);
  try {
    const run = await runContainer(
      container,
      { stdout: stdout.writable(), stderr: stderr.writable(), stdin: job.stdin },
      { timeoutMs: job.timeout_ms, signal, onStarted: () => events.phase('running') },
    ).catch((err: unknown) => {
      throw engineError(err, ctx.settings.image);
    });
    stdout.end();
    stderr.end();
    const finish = (
      end: RunEnd,
      durationMs: number,
      found: Harvest = { artifacts: [], truncated: false },
    ): ExecutionResult =>
      buildResult({
        end,
        limits: job,
        stdout,
        stderr,
        artifacts: found.artifacts,
        artifactsTruncated: found.truncated,
        durationMs,
        tests,
      });
    if (!run.started) return finish(run, 0);
    const end = await withDiskQuota(run, dir, ctx.quota);
    const result = finish(end, run.durationMs, await ctx.artifacts.harvest({ end, job, dir, before, signal }, events));
    // outputBytes: what crossed from the sandbox to this worker, which the sandbox's own cap keeps near the limit.
    ctx.log.info(
      {
        executionId: job.execution_id,
        sandbox: 'cold',
        state: result.state,
        exitCode: result.exit_code,
        durationMs: result.duration_ms,
        outputBytes: stdout.totalBytes + stderr.totalBytes,
      },
      'execution finished',
    );
    return result;
  } finally {
    await remove(ctx, container, job.execution_id);
  }
}

async function create(ctx: ColdRunContext, job: ExecutionJob, dir: string): Promise<Dockerode.Container> {
  const spec = containerSpec(job, dir, ctx.settings, ctx.maxOutputBytes);
  try {
    return await ctx.docker.createContainer(spec);
  } catch (err) {
    if (statusOf(err) !== 409) throw engineError(err, ctx.settings.image);
  }
  // The name is taken: a retry of this execution after its worker died. Its old sandbox goes.
  ctx.log.warn({ executionId: job.execution_id }, 'replacing a leftover sandbox of this execution');
  await remove(ctx, ctx.docker.getContainer(containerName(job.execution_id)), job.execution_id);
  return ctx.docker.createContainer(spec).catch((err: unknown) => {
    throw engineError(err, ctx.settings.image);
  });
}

async function remove(ctx: ColdRunContext, container: Dockerode.Container, executionId: string): Promise<void> {
  await forceRemove(container).catch((err: unknown) =>
    ctx.log.warn({ executionId, err }, 'could not remove sandbox; sweep will retry'),
  );
}
