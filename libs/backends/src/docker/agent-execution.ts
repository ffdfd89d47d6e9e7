import type Dockerode from 'dockerode';
import { ENGINE_STOPPED, stoppedByEngine } from './engine-stops.ts';
import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import { harvest, snapshot, type Harvest } from '../shared/artifacts.ts';
import type { SubvolumeQuota } from '@sandgate/storage';
import { runOutput } from '../shared/output.ts';
import { commandFor } from '../shared/sandbox.ts';
import { buildResult, type RunEnd, withDiskQuota } from '../shared/result.ts';
import type { AgentChannel, AgentRunEnd } from './agent-channel.ts';
import type { ExitFrame } from '../shared/agent-frames.ts';

/** One run in a sandbox that runs the agent (warm-pool or session sandbox). */
export interface AgentRunSetup {
  job: ExecutionJob;
  events: EventSink;
  signal: AbortSignal;
  channel: AgentChannel;
  /** The session directory on the host: the sandbox's /mnt/data. */
  dir: string;
  mode: 'process' | 'stateful';
  /** How long an interrupted run may take to end before the sandbox is killed; 0 kills at once. */
  interruptGraceMs: number;
  maxOutputBytes: number;
  /** Per-session disk quota, where the data directory enforces one: a failure at it gets reason disk_quota. */
  quota?: SubvolumeQuota;
  artifactUrl: (sessionId: string, path: string) => string;
  kill(): Promise<void>;
  /** After the stream ended without an exit frame: how the sandbox ended, and what to tell the user. */
  postMortem(): Promise<Death & { message: string }>;
  /**
   * After a run that ended on its own, before its files are harvested: stops whatever it left running, so that the
   * artifacts are the files as they will stay. Pool sandboxes reset here.
   */
  quiesce?(): Promise<void>;
}

export type AgentOutcome =
  /** The agent never took the run. `retryable`: the sandbox was gone, nothing stopped the run; try another. */
  | { started: false; retryable: boolean; result: ExecutionResult }
  | { started: true; result: ExecutionResult; exit: ExitFrame | undefined };

/** Runs the job through the agent: output to the EventSink as it comes, artifacts from the before/after diff. */
export async function runInAgent(s: AgentRunSetup): Promise<AgentOutcome> {
  const { job, events } = s;
  const before = await snapshot(s.dir);
  const { stdout, stderr } = runOutput(events, s.maxOutputBytes);
  const end = await s.channel.run(
    {
      op: 'run',
      id: job.execution_id,
      language: job.language,
      code: job.code,
      argv: commandFor(job.language, job.code, job.args ?? []),
      env: job.env,
      stdin: job.stdin,
      mode: s.mode,
      cap: s.maxOutputBytes,
    },
    {
      onStarted: () => events.phase('running'),
      stdout: (bytes) => stdout.write(bytes),
      stderr: (bytes) => stderr.write(bytes),
    },
    { timeoutMs: job.timeout_ms, signal: s.signal, interruptGraceMs: s.interruptGraceMs, kill: () => s.kill() },
  );
  stdout.end();
  stderr.end();
  const finish = (runEnd: RunEnd, found: Harvest = { artifacts: [], truncated: false }): ExecutionResult =>
    buildResult({
      end: runEnd,
      limits: job,
      stdout,
      stderr,
      artifacts: found.artifacts,
      artifactsTruncated: found.truncated,
      durationMs: end.durationMs,
    });
  if (!end.started) {
    const stopped = end.timedOut || end.cancelled;
    return {
      started: false,
      retryable: !stopped,
      result: finish({ exitCode: -1, timedOut: end.timedOut, oomKilled: false, cancelled: !end.timedOut }),
    };
  }
  const runEnd = await withDiskQuota(await describeEnd(end, s), s.dir, s.quota);
  if (end.exit !== undefined && !end.timedOut && !end.cancelled) await s.quiesce?.();
  const found = await harvest(runEnd, job, s.dir, before, events, s.artifactUrl, s.signal);
  return { started: true, result: finish(runEnd, found), exit: end.exit };
}

async function describeEnd(end: AgentRunEnd, s: AgentRunSetup): Promise<RunEnd> {
  const { timedOut, cancelled } = end;
  if (end.exit !== undefined) return { exitCode: end.exit.code, timedOut, cancelled, oomKilled: end.exit.oom === true };
  if (timedOut || cancelled) return { exitCode: -1, timedOut, cancelled, oomKilled: false };
  const death = await s.postMortem();
  const why = death.engineStopped ? { engineStopped: ENGINE_STOPPED } : { lost: death.message };
  return { exitCode: death.exitCode, timedOut, cancelled, oomKilled: death.oomKilled, ...why };
}

/**
 * How a sandbox ended that stopped mid-run. The attach stream can end a moment before the engine has recorded the
 * exit, so the exit is waited for (briefly); one still running after that is in no known state and is killed.
 */
export async function deathOf(
  container: Dockerode.Container,
  kill: () => Promise<void>,
  sinceMs: number,
): Promise<Death> {
  const stopped = await Promise.race([
    container.wait({ condition: 'not-running' }).then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 5000).unref()),
  ]);
  if (!stopped) await kill().catch(() => {});
  const state = await container.inspect().then(
    (info) => info.State,
    () => undefined,
  );
  const oomKilled = state?.OOMKilled === true;
  // One we had to kill here was in no known state; one that stopped on its own may have been stopped by the engine.
  const engineStopped = stopped && !oomKilled && (await stoppedByEngine(container, sinceMs));
  return { exitCode: state?.ExitCode ?? -1, oomKilled, engineStopped };
}

/** How a sandbox that stopped mid-run ended: its exit status, an OOM kill, or the engine stopping it. */
export interface Death {
  exitCode: number;
  oomKilled: boolean;
  engineStopped: boolean;
}
