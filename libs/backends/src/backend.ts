import type {
  Artifact,
  ExecutionJob,
  ExecutionResult,
  Phase,
  ResumedEvent,
  SavedVariables,
  TestCase,
  ToolCallEvent,
  ToolResultEvent,
} from '@sandgate/contracts';
import type { BackendCapabilities } from './capabilities.ts';
import type { BackendLogger } from './logger.ts';
import type { TemplatePoolFigures, TemplatePoolSpec } from './pool/template-pools.ts';
import type { TemplateBuildOutcome, TemplateBuildRequest } from './docker/template-build.ts';

/** Where a backend reports what happens during one execution, as it happens. */
export interface EventSink {
  phase(phase: Phase): void;
  stdout(text: string): void;
  stderr(text: string): void;
  artifact(artifact: Artifact): void;
  /** Test mode: one test ended (a `test_result` event). */
  testResult?(test: TestCase): void;
  /** The run's code called a tool, and the call ended (`tool_call`, `tool_result` events). */
  toolCall?(call: ToolCallEvent): void;
  toolResult?(result: ToolResultEvent): void;
  /** The session was paused and this run brought it back in a new sandbox (a `resumed` event). */
  resumed?(resumed: ResumedEvent): void;
}

/** A session, outside a run, for the operations below: which, and whether it is stateful. */
export interface SessionRef {
  sessionId: string;
  stateful: boolean;
}

/** What is alive right now; sweep removes every sandbox that belongs to none of it. */
export interface LiveSet {
  /** Executions some worker holds a live lease on. */
  executions: ReadonlySet<string>;
  /** Sessions that exist (not deleted, not expired): their session sandboxes stay. */
  sessions: ReadonlySet<string>;
  /** Worker instances with a recent heartbeat: their warm pools stay. */
  workers: ReadonlySet<string>;
  /**
   * When `sessions` was read (ms since the epoch): what was made for a session after it (a resume's sandbox, its
   * services state) is not judged by it, since the session may have come back since. Absent: everything is.
   */
  readAt?: number;
}

/** What a backend reports about itself for /metrics; counters are totals since it was made. */
export interface BackendStats {
  /**
   * One-shot runs that got a warm sandbox (`reused`: one reset after an earlier run) or went cold, and sandboxes lost
   * to a failed reset; `ready`: warm sandboxes waiting now.
   */
  pool: { hits: number; reused: number; misses: number; reset_failed: number; ready: number };
  /** The same of each template's pool (`pool` is the runtime image's). */
  templatePools?: TemplatePoolFigures[];
  /** Session sandboxes running on its engine (every worker of that engine sees the same ones). */
  sessionSandboxes: number;
  /** The engine's id, to count those once per engine. */
  engine: string;
}

/**
 * Whether a backend can run sandboxes now, as one cheap probe of its engine found. Its worker publishes it with each
 * heartbeat; /readyz counts the workers whose backend is usable.
 */
export interface BackendHealth {
  usable: boolean;
  /** Why not, for an operator (e.g. `engine unreachable: connect ENOENT /var/run/docker.sock`); absent when usable. */
  reason?: string;
}

/**
 * Runs executions in sandboxes. Coarse on purpose: one call runs one execution end to end,
 * so no engine type (container, pod) crosses this seam.
 */
export interface ExecutionBackend {
  readonly name: string;
  /** What it can run; execute() rejects the rest with unsupported_by_backend. */
  readonly capabilities: BackendCapabilities;
  /**
   * Runs one execution to its end, reporting events as they happen. Resolves with the result for every
   * outcome of the user's code (failed, timeout, oom, cancelled through `signal`); rejects only when the
   * platform itself failed (engine unreachable, image missing), with a SandgateError where it can. `log`, the run's
   * own logger (bound to its execution, session and tenant), takes what the backend says about this run.
   */
  execute(job: ExecutionJob, events: EventSink, signal: AbortSignal, log?: BackendLogger): Promise<ExecutionResult>;
  /** Removes every sandbox this backend's deployment owns that nothing in `live` owns; answers with what it removed. */
  sweep(live: LiveSet): Promise<{ removed: string[] }>;
  /** Its numbers for /metrics; rejects when the engine does not answer. */
  stats?(): Promise<BackendStats>;
  /** Resolves once a warm pool, if the backend keeps one, is full. For benchmarks and tests. */
  poolReady?(): Promise<void>;
  /**
   * Probes whether the engine answers, with one cheap call (a worker asks every heartbeat, 5 s). Resolves within
   * `timeoutMs` (housekeeping/health.ts bounds it) and never rejects: a failure is `usable: false` with its reason. A
   * backend without it has no engine to lose, and counts as usable.
   */
  health?(timeoutMs: number): Promise<BackendHealth>;
  /**
   * Pauses a session (its lock held by the caller): a stateful interpreter's variables are saved to the session's
   * store (unless `discard`), then its sandbox is removed; its files stay. Answers the variables saved (null: none).
   * Rejects with state_too_large when they do not fit SANDGATE_MAX_STATE_BYTES (the sandbox is then left running).
   */
  pauseSession?(session: SessionRef, opts: { discard: boolean }): Promise<SavedVariables | null>;
  /**
   * Saves a live stateful interpreter's variables to `file` without stopping it (a fork's or a snapshot's copy);
   * null when the session has no live sandbox.
   */
  checkpointSession?(session: SessionRef, file: string): Promise<SavedVariables | null>;
  /**
   * Brings a paused session back (POST …/resume): a sandbox made as a run of `job` would make it, a stateful
   * session's variables loaded into it. Answers the `resumed` event's variables.
   */
  resumeSession?(job: ExecutionJob): Promise<ResumedEvent['variables']>;
  /**
   * Keeps a warm pool per template, as listed (the ready templates, from Redis): a one-shot of a template's image
   * takes from its pool. Pools no longer listed are closed.
   */
  setTemplatePools?(pools: TemplatePoolSpec[]): void;
  /**
   * Builds a template's image from its recipe on the engine (Docker; a Kubernetes template names its image), its
   * output to `log` as it comes. Rejects with a TemplateBuildError when the recipe does not build.
   */
  buildTemplate?(
    req: TemplateBuildRequest,
    log: (text: string) => void,
    signal: AbortSignal,
  ): Promise<TemplateBuildOutcome>;
  /** Removes the template images of recipes no template has any more (`keep`: the hashes in use). */
  pruneTemplateImages?(keep: ReadonlySet<string>): Promise<string[]>;
  /** Checks that the engine answers and the image is present; throws a SandgateError otherwise. */
  check(): Promise<void>;
  /** Stops background work (pool refills) and removes this instance's warm pool. */
  close(): Promise<void>;
}
