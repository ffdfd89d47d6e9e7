import type { Artifact, ExecutionJob, ExecutionResult, Phase } from '@sandgate/contracts';

/** Where a backend reports what happens during one execution, as it happens. */
export interface EventSink {
  phase(phase: Phase): void;
  stdout(text: string): void;
  stderr(text: string): void;
  artifact(artifact: Artifact): void;
}

/** What is alive right now; sweep removes every sandbox that belongs to none of it. */
export interface LiveSet {
  /** Executions some worker holds a live lease on. */
  executions: ReadonlySet<string>;
  /** Sessions that exist (not deleted, not expired): their session sandboxes stay. */
  sessions: ReadonlySet<string>;
  /** Worker instances with a recent heartbeat: their warm pools stay. */
  workers: ReadonlySet<string>;
}

/**
 * Runs executions in sandboxes. Coarse on purpose: one call runs one execution end to end,
 * so no engine type (container, pod) crosses this seam.
 */
export interface ExecutionBackend {
  readonly name: string;
  /**
   * Runs one execution to its end, reporting events as they happen. Resolves with the result for every
   * outcome of the user's code (failed, timeout, oom, cancelled through `signal`); rejects only when the
   * platform itself failed (engine unreachable, image missing), with a SandgateError where it can.
   */
  execute(job: ExecutionJob, events: EventSink, signal: AbortSignal): Promise<ExecutionResult>;
  /** Removes every sandbox this backend's deployment owns that nothing in `live` owns; answers with what it removed. */
  sweep(live: LiveSet): Promise<{ removed: string[] }>;
  /** Checks that the engine answers and the image is present; throws a SandgateError otherwise. */
  check(): Promise<void>;
  /** Stops background work (pool refills) and removes this instance's warm pool. */
  close(): Promise<void>;
}
