import type { ArtifactStore } from '../artifacts/artifact-store.ts';
import { randomBytes } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import { SandgateError, type ExecutionJob, type ExecutionResult } from '@sandgate/contracts';
import type { SubvolumeQuota } from '@sandgate/storage';
import type { EventSink } from '../backend.ts';
import { parseFrame, type ExitFrame } from '../agent/agent-frames.ts';
import type { BackendLogger } from '../logger.ts';
import type { OutputCollector } from '../outcome/output.ts';
import { runOutput } from '../run/run-output.ts';
import { buildResult, withDiskQuota, type RunEnd } from '../outcome/result.ts';
import { clusterError, messageOf, statusOf, type PodApi } from './api.ts';
import { LogTail } from './log-tail.ts';
import { ATTEMPT_ANNOTATION, CONTAINERS, podName, sandboxPod, transferSecret, type PodSettings } from './pod-spec.ts';
import { runnerStarted, viewOf, type PodView } from './pod-status.ts';
import type { PodWatch } from './pod-watch.ts';

/** A grant for one execution's Pod to fetch and send back the session's files (the gateway's /internal/transfer). */
export interface TransferGrant {
  token: string;
  revoke(): Promise<void>;
}
export type GrantTransfer = (job: ExecutionJob, ttlSeconds: number) => Promise<TransferGrant>;

export interface PodRunContext {
  api: PodApi;
  /** The worker's watch of its deployment's Pods: how a run sees its Pod change without reading it each time. */
  watch?: PodWatch;
  settings: PodSettings;
  /** The gateway as Pods reach it. */
  gatewayUrl: string;
  grantTransfer: GrantTransfer;
  maxOutputBytes: number;
  quota?: SubvolumeQuota;
  artifacts: ArtifactStore;
  log: BackendLogger;
  timing: PodTiming;
}

export interface PodTiming {
  /**
   * While the watch is down: between two reads of a Pod, at first; it grows by pollGrowth each time, to pollMaxMs.
   * Slower growth notices the end of a short run sooner, at the cost of more API calls.
   */
  pollMinMs: number;
  pollMaxMs: number;
  pollGrowth: number;
  /** While the runner runs: between two reads of its log, the output the run streams. */
  outputEveryMs: number;
  /** A Pod the watch said nothing of for this long is read once (a safety net under a watch that lost an event). */
  resyncMs: number;
  /** How long a Pod may take to start its runner (scheduling, image pulls, stage) before the run fails. */
  startupMs: number;
  /** How long the runner may be gone without its exit frame before the run is given up as lost. */
  deadRunnerGraceMs: number;
  /** How long harvest's result line may take to show in its log after it ended. */
  resultLagMs: number;
}

/** How a Pod was seen to end. */
type Ending =
  | { kind: 'harvested' }
  | { kind: 'cancelled' }
  | { kind: 'evicted'; message: string }
  | { kind: 'deadline' }
  | { kind: 'backstop' }
  | { kind: 'runner_dead'; state: k8s.V1ContainerStateTerminated }
  | { kind: 'pod_failed'; message: string };

/** What harvest printed as its last line. */
interface HarvestLine {
  uploaded: number;
  removed: number;
  bytes: number;
  failures: number;
  failed: { path: string; code: string; detail: string }[];
  fatal?: string;
}

/** Upload refusals that mean the session has no room for what the run wrote. */
const NO_ROOM = new Set(['storage_quota_exceeded', 'insufficient_storage', 'payload_too_large']);

/**
 * Runs one execution in a Pod of its own (a one-shot, or a run of a process session): creates the Pod, then the
 * transfer Secret it owns; follows the Pod with plain GETs (its status, and its runner's log for the output), and
 * deletes it at the end, whatever happened. The files the run wrote reach the session store through the gateway
 * before the result is built, so its artifacts are found as on every other backend.
 */
export async function runInPod(
  ctx: PodRunContext,
  job: ExecutionJob,
  dir: string,
  events: EventSink,
  signal: AbortSignal,
): Promise<ExecutionResult> {
  const before = await ctx.artifacts.snapshot(dir);
  const { stdout, stderr, tests } = runOutput(events, ctx.maxOutputBytes, job);
  const { settings } = ctx;
  const lifetimeMs = settings.startupAllowanceMs + job.timeout_ms + settings.harvestGraceMs;
  const grant = await ctx.grantTransfer(job, lifetimeMs / 1000 + 60);
  const name = podName(job.execution_id);
  let uid: string | undefined;
  try {
    const pod = await createPod(ctx, job, before.size > 0 || job.stdin !== null);
    uid = pod.metadata!.uid!;
    await createSecret(ctx, job, pod, grant.token);
    const follow = new PodFollower(ctx, job, pod, stdout, stderr, events);
    const ending = await follow.untilEnd(signal);
    stdout.end();
    stderr.end();
    const line = ending.kind === 'harvested' ? await follow.harvestLine() : undefined;
    const end = await withDiskQuota(runEnd(ending, follow.exit, line, settings), dir, ctx.quota);
    const durationMs = follow.exit?.durationMs ?? follow.runningForMs();
    const found =
      ending.kind === 'harvested'
        ? await ctx.artifacts.harvest(
            {
              end,
              job,
              dir,
              before,
              signal,
              failed: line?.failed.map((f) => ({ path: f.path, reason: `${f.code}: ${f.detail}` })),
            },
            events,
          )
        : undefined;
    ctx.log.info(
      {
        executionId: job.execution_id,
        sandbox: 'pod',
        ending: ending.kind,
        exitCode: end.exitCode,
        uploaded: line?.uploaded,
        apiCalls: follow.apiCalls,
      },
      'execution finished',
    );
    return buildResult({
      end,
      limits: job,
      stdout,
      stderr,
      artifacts: found?.artifacts ?? [],
      artifactsTruncated: found?.truncated ?? false,
      durationMs,
      tests,
    });
  } finally {
    if (uid !== undefined) {
      await ctx.api.deletePod(name, uid).catch((err: unknown) => {
        if (statusOf(err) !== 404)
          ctx.log.warn(
            { executionId: job.execution_id, err: messageOf(err) },
            'could not delete the sandbox Pod; sweep will',
          );
      });
    }
    await grant
      .revoke()
      .catch((err: unknown) => ctx.log.warn({ err }, 'could not revoke a transfer token; it expires on its own'));
  }
}

/**
 * Creates the execution's Pod. Its name is the execution's, so a Pod by that name already there is a leftover of an
 * earlier attempt of this execution whose worker died: it is deleted (that very Pod, by uid) and made again.
 */
async function createPod(ctx: PodRunContext, job: ExecutionJob, stage: boolean): Promise<k8s.V1Pod> {
  const attempt = randomBytes(8).toString('hex');
  const spec = sandboxPod(job, ctx.settings, attempt, { stage });
  const name = spec.metadata!.name!;
  for (let tries = 0; ; tries++) {
    try {
      return await ctx.api.createPod(spec);
    } catch (err) {
      if (statusOf(err) !== 409 || tries >= 5) throw clusterError(err, 'creating the sandbox Pod');
    }
    const existing = await ctx.api.readPod(name).catch((err: unknown) => {
      if (statusOf(err) === 404) return undefined;
      throw clusterError(err, 'reading a leftover sandbox Pod');
    });
    // A create that timed out after it had succeeded: the Pod is this attempt's own.
    if (existing?.metadata?.annotations?.[ATTEMPT_ANNOTATION] === attempt) return existing;
    if (existing?.metadata?.uid && existing.metadata.deletionTimestamp === undefined) {
      ctx.log.warn({ executionId: job.execution_id }, 'replacing a leftover sandbox Pod of this execution');
      await ctx.api.deletePod(name, existing.metadata.uid).catch((err: unknown) => {
        if (statusOf(err) !== 404 && statusOf(err) !== 409) throw clusterError(err, 'deleting a leftover sandbox Pod');
      });
    }
    await new Promise((r) => setTimeout(r, 200 * (tries + 1)));
  }
}

/**
 * The transfer Secret of this attempt, owned by its Pod. A 409 is this attempt's own create that timed out after it
 * had succeeded (the name is the attempt's): what it holds is this attempt's.
 */
async function createSecret(ctx: PodRunContext, job: ExecutionJob, pod: k8s.V1Pod, token: string): Promise<void> {
  const secret = transferSecret(job, pod, ctx.settings, ctx.gatewayUrl, token);
  await ctx.api.createSecret(secret).catch((err: unknown) => {
    if (statusOf(err) !== 409) throw clusterError(err, 'creating the transfer Secret');
  });
}

/**
 * Observes one Pod until it has ended, turning what it sees into phase and output events. The worker's watch tells it
 * each change of the Pod, so it reads the API only for the runner's output (every outputEveryMs while it runs, and
 * once at the end); without a watch in sync it reads the Pod itself, every pollMinMs growing to pollMaxMs.
 */
class PodFollower {
  exit: ExitFrame | undefined;
  apiCalls = 0;
  readonly #runner: LogTail;
  readonly name: string;
  readonly #uid: string;
  /** The Pod as last seen, and whether the watch has shown it at all (its first event may come after the create). */
  #last: k8s.V1Pod;
  #watched = false;
  #heardAt = Date.now();
  #runningSince: number | undefined;
  #runnerGoneAt: number | undefined;

  readonly #ctx: PodRunContext;
  readonly #job: ExecutionJob;
  readonly #stdout: OutputCollector;
  readonly #stderr: OutputCollector;
  readonly #events: EventSink;
  constructor(
    ctx: PodRunContext,
    job: ExecutionJob,
    created: k8s.V1Pod,
    stdout: OutputCollector,
    stderr: OutputCollector,
    events: EventSink,
  ) {
    this.#ctx = ctx;
    this.#job = job;
    this.#stdout = stdout;
    this.#stderr = stderr;
    this.#events = events;
    this.name = created.metadata!.name!;
    this.#uid = created.metadata!.uid!;
    this.#last = created;
    // Frames are JSON of at most cap+1 bytes per stream, escaped: a read this large never cuts the run's output.
    this.#runner = new LogTail(ctx.api, this.name, CONTAINERS.runner, Math.max(1 << 20, ctx.maxOutputBytes * 16));
  }

  runningForMs(): number {
    return this.#runningSince === undefined ? 0 : Date.now() - this.#runningSince;
  }

  async untilEnd(signal: AbortSignal): Promise<Ending> {
    const { timing } = this.#ctx;
    const created = Date.now();
    let pause = timing.pollMinMs;
    let nextOutput: number | undefined;
    for (;;) {
      if (signal.aborted) return { kind: 'cancelled' };
      const view = await this.#observe();
      if (runnerStarted(view)) nextOutput ??= Date.now() + timing.outputEveryMs;
      const ending = this.#ending(view, created);
      if (ending !== undefined) {
        // What the runner printed last is in its log, unless the Pod is gone with its logs (eviction, deadline).
        if (runnerStarted(view) && ending.kind !== 'evicted') await this.#readOutput();
        return ending;
      }
      if (nextOutput !== undefined && Date.now() >= nextOutput) {
        await this.#readOutput();
        nextOutput = Date.now() + timing.outputEveryMs;
      }
      const watch = this.#watch();
      if (watch !== undefined) {
        const until = Math.min(nextOutput ?? Infinity, this.#heardAt + timing.resyncMs);
        await watch.changed(this.name, Math.max(1, until - Date.now()), signal);
      } else {
        await sleep(Math.min(pause, Math.max(1, (nextOutput ?? Infinity) - Date.now())), signal);
        pause = Math.min(timing.pollMaxMs, Math.round(pause * timing.pollGrowth));
      }
    }
  }

  /** The watch, while it follows the API server. */
  #watch(): PodWatch | undefined {
    return this.#ctx.watch?.synced ? this.#ctx.watch : undefined;
  }

  /**
   * The Pod now: as the watch last showed it, or read from the API when there is no watch in sync, when the watch
   * shows it gone (deleted, or another Pod by its name), or when the watch has said nothing of it for resyncMs.
   */
  async #observe(): Promise<PodView> {
    const watch = this.#watch();
    const seen = watch?.get(this.name);
    let pod: k8s.V1Pod | undefined;
    if (seen?.metadata?.uid === this.#uid) {
      if (seen !== this.#last) this.#heardAt = Date.now();
      this.#watched = true;
      pod = seen;
    } else if (watch !== undefined && !this.#watched && Date.now() - this.#heardAt < this.#ctx.timing.resyncMs) {
      pod = this.#last; // made, and not shown by the watch yet
    }
    if (pod === undefined || Date.now() - this.#heardAt >= this.#ctx.timing.resyncMs) {
      this.apiCalls++;
      pod = await this.#ctx.api.readPod(this.name).catch((err: unknown) => {
        if (statusOf(err) === 404)
          throw new SandgateError('backend_unavailable', 'The sandbox Pod was deleted by someone else during the run.');
        throw clusterError(err, 'reading the sandbox Pod');
      });
      if (pod.metadata?.uid !== this.#uid)
        throw new SandgateError('backend_unavailable', 'The sandbox Pod was deleted by someone else during the run.');
      this.#heardAt = Date.now();
    }
    this.#last = pod;
    const view = viewOf(pod);
    if (runnerStarted(view) && this.#runningSince === undefined) {
      this.#runningSince = Date.now();
      this.#events.phase('running');
    }
    return view;
  }

  async #readOutput(): Promise<void> {
    this.apiCalls++;
    const lines = await this.#runner.read().catch((err: unknown) => {
      // Gone with its node or its Pod: what was read so far is what there is.
      if (statusOf(err) === 404 || statusOf(err) === 400) return [];
      throw clusterError(err, "reading the runner's log");
    });
    for (const line of lines) {
      const frame = parseFrame(line);
      if (frame === undefined) {
        this.#ctx.log.warn(
          { executionId: this.#job.execution_id, line: line.slice(0, 200) },
          'unexpected line in the runner log',
        );
      } else if (frame.t === 'out') this.#stdout.write(Buffer.from(frame.d, 'latin1'));
      else if (frame.t === 'err') this.#stderr.write(Buffer.from(frame.d, 'latin1'));
      else if (frame.t === 'exit') this.exit = frame;
    }
  }

  #ending(view: PodView, created: number): Ending | undefined {
    const { timing, settings } = this.#ctx;
    if (view.reason === 'Evicted') return { kind: 'evicted', message: view.message ?? 'evicted' };
    if (view.reason === 'DeadlineExceeded') return { kind: 'deadline' };
    const stage = view.stage?.terminated;
    if (stage && stage.exitCode !== 0) {
      throw new SandgateError(
        'backend_unavailable',
        `The sandbox Pod could not fetch the session's files (stage exited ` +
          `${stage.exitCode}${stage.message ? `: ${stage.message}` : ''}).`,
      );
    }
    // Harvest gives up on a runner that never comes (its image not pulled, …): the runner's reason is the run's, not
    // an exit the runner did not report.
    if (view.harvest?.terminated && this.#runningSince === undefined && view.stuck) {
      throw new SandgateError('backend_unavailable', `The sandbox's runner could not start: ${view.stuck.message}.`);
    }
    if (view.harvest?.terminated) return { kind: 'harvested' };
    if (view.phase === 'Failed' || view.phase === 'Succeeded') {
      return {
        kind: 'pod_failed',
        message:
          `The sandbox Pod ended (${view.phase}${view.reason ? `, ${view.reason}` : ''}` +
          `${view.message ? `: ${view.message}` : ''}) before it reported the run.`,
      };
    }
    const now = Date.now();
    const runner = view.runner?.terminated;
    if (runner && this.exit === undefined) {
      this.#runnerGoneAt ??= now;
      if (now - this.#runnerGoneAt > timing.deadRunnerGraceMs) return { kind: 'runner_dead', state: runner };
    }
    if (this.#runningSince === undefined) {
      const why = view.stuck?.message ?? view.unschedulable;
      if (view.stuck?.hopeless || now - created > timing.startupMs) {
        throw new SandgateError(
          'backend_unavailable',
          `The sandbox Pod did not start within ${timing.startupMs} ms` + `${why ? `: ${why}` : ''}.`,
        );
      }
      return undefined;
    }
    if (now - this.#runningSince > this.#job.timeout_ms + settings.harvestGraceMs + timing.deadRunnerGraceMs) {
      return { kind: 'backstop' };
    }
    return undefined;
  }

  /** Harvest's result line, read again for a while when the log lags behind the container's end. */
  async harvestLine(): Promise<HarvestLine | undefined> {
    const deadline = Date.now() + this.#ctx.timing.resultLagMs;
    const tail = new LogTail(this.#ctx.api, this.name, CONTAINERS.harvest, 1 << 20);
    let last: HarvestLine | undefined;
    for (;;) {
      this.apiCalls++;
      const lines = await tail.read().catch(() => [] as string[]);
      for (const line of lines) last = parseHarvestLine(line) ?? last;
      if (last !== undefined || Date.now() > deadline) return last;
      await sleep(this.#ctx.timing.pollMinMs);
    }
  }
}

function parseHarvestLine(line: string): HarvestLine | undefined {
  try {
    const v = JSON.parse(line) as Partial<HarvestLine> & { t?: string };
    if (v.t !== 'harvest' || typeof v.uploaded !== 'number') return undefined;
    return {
      uploaded: v.uploaded,
      removed: v.removed ?? 0,
      bytes: v.bytes ?? 0,
      failures: v.failures ?? 0,
      failed: Array.isArray(v.failed) ? v.failed : [],
      ...(typeof v.fatal === 'string' ? { fatal: v.fatal } : {}),
    };
  } catch {
    return undefined;
  }
}

/** How the run ended, from the way the Pod ended, the runner's exit frame and harvest's line. */
export function runEnd(
  ending: Ending,
  exit: ExitFrame | undefined,
  line: HarvestLine | undefined,
  s: PodSettings,
): RunEnd {
  const base: RunEnd = {
    exitCode: exit?.code ?? -1,
    timedOut: exit?.timedOut === true,
    oomKilled: exit?.oom === true,
    cancelled: false,
  };
  switch (ending.kind) {
    case 'cancelled':
      return { ...base, cancelled: true };
    case 'deadline':
    case 'backstop':
      return { ...base, timedOut: true };
    case 'evicted':
      // The kubelet evicts a Pod whose workspace emptyDir outgrew its sizeLimit: the session's disk quota.
      return /emptydir/i.test(ending.message) && s.workspaceBytes > 0
        ? {
            ...base,
            diskQuota: `The run's files outgrew the session's disk quota of ${s.workspaceBytes} bytes; the sandbox was evicted.`,
          }
        : { ...base, engineStopped: `The cluster evicted the sandbox Pod: ${ending.message}` };
    case 'runner_dead':
      if (ending.state.reason === 'OOMKilled') return { ...base, exitCode: ending.state.exitCode, oomKilled: true };
      return {
        ...base,
        lost: `The sandbox's runner ended (${ending.state.reason ?? `exit ${ending.state.exitCode}`}) without reporting the program's exit.`,
      };
    case 'pod_failed':
      return { ...base, engineStopped: ending.message };
    case 'harvested':
      break;
  }
  if (exit === undefined) return { ...base, lost: "The sandbox's runner did not report the program's exit." };
  if (line === undefined || line.fatal !== undefined) {
    return { ...base, lost: `The run's files could not be sent back${line?.fatal ? ` (${line.fatal})` : ''}.` };
  }
  const noRoom = line.failed.find((f) => NO_ROOM.has(f.code));
  if (noRoom !== undefined)
    return { ...base, diskQuota: `Some files the run wrote could not be kept: ${noRoom.detail}` };
  return base;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}
