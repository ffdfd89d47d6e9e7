import type { Artifact, ExecutionResult, TestReport } from '@sandgate/contracts';
import type { ExecutionJob } from '@sandgate/contracts';
import type { SubvolumeQuota, Volumes } from '@sandgate/storage';

/** How a sandbox ended, as the engine saw it. */
export interface RunEnd {
  /** The program's exit status; -1 when it never started. */
  exitCode: number;
  /** The platform killed it at the wall-clock limit. */
  timedOut: boolean;
  /** The kernel killed something in it for exceeding the memory limit. */
  oomKilled: boolean;
  /** The caller cancelled it (before or during the run). */
  cancelled: boolean;
  /**
   * The sandbox ended mid-run without the program's exit being reported (a long-lived sandbox whose agent or
   * interpreter died): why, for people. The run failed, whatever its exit status says.
   */
  lost?: string;
  /**
   * The engine stopped the sandbox mid-run (it shut down or restarted, or the container was stopped through it): why,
   * for people. The run ends as `error` with reason `backend_unavailable`, whatever its exit status says.
   */
  engineStopped?: string;
  /** The program failed with the session's files at its disk quota: why, for people. */
  diskQuota?: string;
  /** The sandbox was ended for reaching its pids limit (gVisor: the whole sandbox stops): why, for people. */
  pidsLimit?: string;
}

/** What a run reports when the engine, not the code, ended its sandbox. */
export const ENGINE_STOPPED =
  'The container engine stopped the sandbox during this run (it was shutting down or restarting, ' +
  'or the container was stopped through it); run it again.';

/** The limits the messages quote, so a person reading the result knows which one was hit. */
export interface RunLimits {
  timeout_ms: number;
  memory_mb: number;
}

type Outcome = Pick<ExecutionResult, 'state' | 'exit_code' | 'reason' | 'message'>;

/**
 * The outcome of a run. The platform's own reasons win over the exit status: a timeout or a cancel is
 * reported as such even if the kill raced the program's own exit, and an OOM kill fails the run even when
 * only a child died and the main program exited 0 (its output is then incomplete).
 */
export function outcomeOf(end: RunEnd, limits: RunLimits): Outcome {
  if (end.timedOut) {
    return {
      state: 'timeout',
      exit_code: -1,
      reason: 'timeout',
      message: `Killed after the ${limits.timeout_ms} ms time limit.`,
    };
  }
  if (end.cancelled) {
    return {
      state: 'cancelled',
      exit_code: end.exitCode,
      reason: 'cancelled',
      message: 'Cancelled before it finished.',
    };
  }
  if (end.engineStopped !== undefined) {
    return { state: 'error', exit_code: end.exitCode, reason: 'backend_unavailable', message: end.engineStopped };
  }
  if (end.oomKilled) {
    return {
      state: 'failed',
      exit_code: end.exitCode,
      reason: 'oom',
      message: `Killed for exceeding the ${limits.memory_mb} MB memory limit.`,
    };
  }
  if (end.diskQuota !== undefined) {
    return { state: 'failed', exit_code: end.exitCode, reason: 'disk_quota', message: end.diskQuota };
  }
  if (end.pidsLimit !== undefined) {
    return { state: 'failed', exit_code: end.exitCode, reason: 'pids_limit', message: end.pidsLimit };
  }
  if (end.lost !== undefined) return { state: 'failed', exit_code: end.exitCode, message: end.lost };
  return { state: end.exitCode === 0 ? 'completed' : 'failed', exit_code: end.exitCode };
}

/** What a result needs from one output stream (an OutputCollector fits). */
export interface CapturedOutput {
  readonly text: string;
  readonly truncated: boolean;
}

export interface ResultParts {
  end: RunEnd;
  limits: RunLimits;
  stdout: CapturedOutput;
  stderr: CapturedOutput;
  /** Files created or changed by the run; dropped unless the run completed. */
  artifacts: Artifact[];
  /** Some changed files were left out by the harvest's bounds. */
  artifactsTruncated?: boolean;
  durationMs: number;
  /** Test mode: the tests' reports, out of stdout. */
  tests?: { report(): TestReport; notRun(stderr: string): string | undefined };
}

/**
 * A failed run whose session is at its disk quota, or that has a read-write volume at its size, failed because of it
 * (the kernel answered EDQUOT): the end says so. Looked at only for runs that failed on their own, where the quota is
 * the likely cause. `volumesFull` says which volume is full, if one is.
 */
export async function withDiskQuota(
  end: RunEnd,
  dir: string,
  quota: SubvolumeQuota | undefined,
  volumesFull?: () => Promise<string | undefined>,
): Promise<RunEnd> {
  if (end.exitCode === 0 || end.timedOut || end.cancelled || end.oomKilled || end.engineStopped) return end;
  if (end.pidsLimit !== undefined || end.diskQuota !== undefined) return end;
  if (quota && (await quota.reached(dir))) {
    return { ...end, diskQuota: `The session's files reached its disk quota of ${quota.bytes} bytes.` };
  }
  const full = await volumesFull?.();
  return full === undefined ? end : { ...end, diskQuota: full };
}

/** The first read-write volume of the job that has (all but) reached its size, as a run's result words it. */
export async function fullVolume(job: ExecutionJob, volumes: Volumes): Promise<string | undefined> {
  for (const v of job.volumes ?? []) {
    if (!v.read_only && (await volumes.reached(v.id).catch(() => false))) {
      return `The volume ${v.name} (${v.path}) reached its size of ${v.size_bytes} bytes.`;
    }
  }
  return undefined;
}

/** Assembles the one ExecutionResult every backend returns, from what it observed. */
export function buildResult(parts: ResultParts): ExecutionResult {
  const outcome = outcomeOf(parts.end, parts.limits);
  const result: ExecutionResult = {
    state: outcome.state,
    exit_code: outcome.exit_code,
    stdout: parts.stdout.text,
    stderr: parts.stderr.text,
    stdout_truncated: parts.stdout.truncated,
    stderr_truncated: parts.stderr.truncated,
    artifacts: outcome.state === 'completed' ? parts.artifacts : [],
    duration_ms: Math.max(0, Math.round(parts.durationMs)),
  };
  if (outcome.state === 'completed' && parts.artifactsTruncated === true) result.artifacts_truncated = true;
  if (outcome.reason !== undefined) result.reason = outcome.reason;
  if (outcome.message !== undefined) result.message = outcome.message;
  if (parts.tests !== undefined) {
    result.tests = parts.tests.report();
    // No test ran on a run that ended on its own: a syntax or import error, or no test at all. Not "0 of 0 passed".
    const notRun = parts.tests.notRun(parts.stderr.text);
    if (notRun !== undefined && (outcome.state === 'completed' || outcome.state === 'failed') && !outcome.reason) {
      Object.assign(result, { state: 'error', reason: 'tests_not_run', message: notRun, artifacts: [] });
    }
  }
  return result;
}
