import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import type { Harvest } from '../artifacts/artifacts.ts';
import type { ArtifactStore, TransferFailure } from '../artifacts/artifact-store.ts';
import type { SubvolumeQuota } from '@sandgate/storage';
import { runOutput } from '../run/run-output.ts';
import { programFor } from '../run/sandbox.ts';
import { buildResult, ENGINE_STOPPED, type RunEnd, withDiskQuota } from '../outcome/result.ts';
import type { AgentChannel, AgentRunEnd } from './agent-channel.ts';
import type { ExitFrame } from './agent-frames.ts';
import type { ToolBroker } from '../run/tool-broker.ts';

/** One run in a sandbox that runs the agent (a warm-pool sandbox, or a session's sandbox or Pod). */
export interface AgentRunSetup {
  job: ExecutionJob;
  /** The time the code has: the job's limit (the default), less what loading the session's variables took. */
  timeoutMs?: number;
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
  /** Which read-write volume of the session is full, if one is: a failure then gets reason disk_quota too. */
  volumesFull?: () => Promise<string | undefined>;
  /** Where the session's files are, and how the run's artifacts are found there. */
  artifacts: ArtifactStore;
  /** The tenant's tools, when it has any: the run's code gets a channel to call them (sandgate.tools). */
  tools?: ToolBroker;
  kill(): Promise<void>;
  /** After the stream ended without an exit frame: how the sandbox ended, and what to tell the user. */
  postMortem(): Promise<Death & { message: string }>;
  /**
   * After a run that ended on its own, before its files are harvested: stops whatever it left running, so that the
   * artifacts are the files as they will stay. Pool sandboxes reset here.
   */
  quiesce?(): Promise<void>;
  /**
   * Where the sandbox's workspace is its own (a Kubernetes session Pod): `prepare` brings the session's files into it
   * before the run, `collect` brings what the run wrote back into `dir` before the artifacts are looked for.
   */
  prepare?(): Promise<void>;
  /** `diskQuota`: something the run wrote could not be kept for want of room (a volume's size): why, for people. */
  collect?(): Promise<{ failed: TransferFailure[]; diskQuota?: string }>;
}

export type AgentOutcome =
  /** The agent never took the run. `retryable`: the sandbox was gone, nothing stopped the run; try another. */
  | { started: false; retryable: boolean; result: ExecutionResult }
  | { started: true; result: ExecutionResult; exit: ExitFrame | undefined };

/** Runs the job through the agent: output to the EventSink as it comes, artifacts from the before/after diff. */
export async function runInAgent(s: AgentRunSetup): Promise<AgentOutcome> {
  const { job, events } = s;
  await s.prepare?.();
  const before = await s.artifacts.snapshot(s.dir);
  const { stdout, stderr, tests } = runOutput(events, s.maxOutputBytes, job);
  const end = await s.channel.run(
    {
      op: 'run',
      id: job.execution_id,
      language: job.language,
      code: job.code,
      argv: programFor(job),
      env: job.env,
      stdin: job.stdin,
      mode: s.mode,
      cap: s.maxOutputBytes,
      ...(s.tools ? { tools: true } : {}),
      ...(job.service === undefined ? {} : { service: job.service }),
    },
    {
      onStarted: () => events.phase('running'),
      stdout: (bytes) => stdout.write(bytes),
      stderr: (bytes) => stderr.write(bytes),
      ...(s.tools ? { toolCall: (call) => s.tools!.handle(call) } : {}),
    },
    {
      timeoutMs: s.timeoutMs ?? job.timeout_ms,
      signal: s.signal,
      interruptGraceMs: s.interruptGraceMs,
      kill: () => s.kill(),
    },
  );
  stdout.end();
  stderr.end();
  const finish = (runEnd: RunEnd, found: Harvest = { artifacts: [], truncated: false }): ExecutionResult => {
    const result = buildResult({
      end: runEnd,
      limits: job,
      stdout,
      stderr,
      artifacts: found.artifacts,
      artifactsTruncated: found.truncated,
      durationMs: end.durationMs,
      tests,
    });
    if (s.tools && s.tools.calls.length > 0) result.tool_calls = s.tools.calls;
    return result;
  };
  if (!end.started) {
    const stopped = end.timedOut || end.cancelled;
    return {
      started: false,
      retryable: !stopped,
      result: finish({ exitCode: -1, timedOut: end.timedOut, oomKilled: false, cancelled: !end.timedOut }),
    };
  }
  const described = await describeEnd(end, s);
  // Files first: the quota is checked on the session's files as they will stay.
  const collected = s.channel.closed ? undefined : await s.collect?.();
  const checked = await withDiskQuota(described, s.dir, s.quota, s.volumesFull);
  // Files the run wrote and the store could not keep fail it as a full disk would have (a one-shot Pod's do too).
  const runEnd =
    collected?.diskQuota !== undefined && checked.diskQuota === undefined && !end.timedOut && !end.cancelled
      ? { ...checked, diskQuota: collected.diskQuota }
      : checked;
  if (end.exit !== undefined && !end.timedOut && !end.cancelled) await s.quiesce?.();
  const found = await s.artifacts.harvest(
    { end: runEnd, job, dir: s.dir, before, signal: s.signal, failed: collected?.failed },
    events,
  );
  return { started: true, result: finish(runEnd, found), exit: end.exit };
}

async function describeEnd(end: AgentRunEnd, s: AgentRunSetup): Promise<RunEnd> {
  const { timedOut, cancelled } = end;
  if (end.exit !== undefined) return { exitCode: end.exit.code, timedOut, cancelled, oomKilled: end.exit.oom === true };
  if (timedOut || cancelled) return { exitCode: -1, timedOut, cancelled, oomKilled: false };
  const death = await s.postMortem();
  const why = death.diskQuota
    ? { diskQuota: death.diskQuota }
    : death.engineStopped
      ? { engineStopped: death.stoppedBecause ?? ENGINE_STOPPED }
      : death.pidsLimit
        ? { pidsLimit: `${death.pidsLimit} ${death.message}` }
        : { lost: death.message };
  return { exitCode: death.exitCode, timedOut, cancelled, oomKilled: death.oomKilled, ...why };
}

/** How a sandbox that stopped mid-run ended: its exit status, an OOM kill, or the platform stopping it. */
export interface Death {
  exitCode: number;
  oomKilled: boolean;
  /** The engine or cluster, not the code, ended the sandbox. */
  engineStopped: boolean;
  /** Why, for people, where it is not the container engine's usual ENGINE_STOPPED. */
  stoppedBecause?: string;
  /** It was ended for outgrowing the session's disk quota: why, for people. */
  diskQuota?: string;
  /** It was ended for reaching its limit on processes (gVisor ends the whole sandbox there): why, for people. */
  pidsLimit?: string;
}
