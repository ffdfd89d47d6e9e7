import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';
import type { Workspaces } from '@sandgate/storage';
import type { EventSink } from '../backend.ts';
import { buildResult } from '../outcome/result.ts';

/**
 * The first steps of every run on every backend: the session's workspace exists (made if missing, and given back to
 * the sandbox user if it was not), `starting` is announced, and a run cancelled meanwhile ends here as cancelled.
 * Answers the workspace directory, or the result of a run that never started.
 */
export async function beginRun(
  workspaces: Workspaces,
  job: ExecutionJob,
  events: EventSink,
  signal: AbortSignal,
): Promise<{ dir: string; result?: undefined } | { result: ExecutionResult }> {
  const dir = await workspaces.create(job.session_id);
  events.phase('starting');
  if (!signal.aborted) return { dir };
  const empty = { text: '', truncated: false };
  const end = { exitCode: -1, timedOut: false, oomKilled: false, cancelled: true };
  return { result: buildResult({ end, limits: job, stdout: empty, stderr: empty, artifacts: [], durationMs: 0 }) };
}

/**
 * Executions in flight in this process: sweep never removes their sandboxes, whatever live set its caller computed
 * (which may predate them).
 */
export class InFlight {
  readonly #ids = new Set<string>();

  async around<T>(id: string, run: () => Promise<T>): Promise<T> {
    this.#ids.add(id);
    try {
      return await run();
    } finally {
      this.#ids.delete(id);
    }
  }

  with(live: ReadonlySet<string>): Set<string> {
    return new Set([...live, ...this.#ids]);
  }
}
