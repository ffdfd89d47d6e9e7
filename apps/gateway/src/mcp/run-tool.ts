import { type Language, type RunOutput } from '@sandgate/contracts';
import { endedRecord, endingOf, type ExecutionRecord, type StoredEvent } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';
import type { ExecutionControl } from '../core/execution-control.ts';
import { artifactImages } from './artifact-bytes.ts';
import { mcpArtifact, sandboxPath } from './paths.ts';
import type { CallRef, RunCancels } from './run-cancels.ts';
import type { ToolCall } from './tool-call.ts';
import { ToolFailure, type ToolOutput } from './tool-result.ts';

/** Output shown in one progress notification, at most; the whole of it is in the result. */
const PROGRESS_TEXT_CHARS = 2000;

/** run_python, run_code and run_tests: an execution in a session, followed to its end with progress, cancellable. */
export class RunTool {
  readonly #executions: ExecutionControl;

  readonly #d: GatewayDeps;
  readonly #cancels: RunCancels;
  constructor(d: GatewayDeps, cancels: RunCancels) {
    this.#d = d;
    this.#cancels = cancels;
    this.#executions = d.executionControl;
  }

  async run(call: ToolCall, sessionId: string, language: Language, code: string, tests?: string): Promise<ToolOutput> {
    const test = tests === undefined ? {} : { mode: 'test' as const, tests };
    let rec = await this.#executions.create(call.tenant, { session_id: sessionId, language, code, ...test });
    try {
      if (call.ref && (await this.#cancels.attach(call.ref, rec.id))) await this.#executions.cancel(rec, 0);
      rec = await this.#follow(rec, call);
    } finally {
      if (call.ref) await this.#cancels.detach(call.ref).catch(() => {});
    }
    if (!rec.result) {
      const message = `run ${rec.id} is still ${rec.state}; see GET /v1/executions/${rec.id}`;
      throw new ToolFailure({ error: 'not_finished', message });
    }
    const dir = this.#d.workspaces.dir(sessionId);
    const images = await artifactImages(dir, rec.result.artifacts, this.#d.config.maxArtifactReadBytes);
    return { result: this.#present(rec), images };
  }

  /** A client's notifications/cancelled: cancels that call's run, wherever it runs, or the run it is to start. */
  async cancel(ref: CallRef): Promise<void> {
    const id = await this.#cancels.cancel(ref);
    const rec = id ? await this.#d.executions.get(id) : null;
    if (rec && rec.tenant === ref.tenant) await this.#executions.cancel(rec, 0);
  }

  /** Reads the run's events from the first (so none is missed), sending progress, until its result. */
  async #follow(rec: ExecutionRecord, call: ToolCall): Promise<ExecutionRecord> {
    for await (const ev of this.#d.hub.subscribe(this.#d.executions.eventsKey(rec.id), null, call.signal)) {
      const ending = endingOf(ev);
      if (ending) return endedRecord(rec, ending);
      if (ev.type === 'result') break;
      if (call.progress) await call.progress(describe(ev)).catch(() => {});
    }
    return (await this.#d.executions.get(rec.id)) ?? rec;
  }

  #present(rec: ExecutionRecord): RunOutput {
    const r = rec.result!;
    // The contract's words for a timeout, after whatever the program printed.
    const timedOut = `Execution timed out after ${rec.timeout_ms / 1000} seconds`;
    const sep = r.stderr === '' || r.stderr.endsWith('\n') ? '' : '\n';
    const stderr = r.state === 'timeout' ? `${r.stderr}${sep}${timedOut}` : r.stderr;
    return {
      session_id: rec.session_id,
      run_id: rec.id,
      state: r.state,
      exit_code: r.exit_code,
      stdout: r.stdout,
      stderr,
      stdout_truncated: r.stdout_truncated,
      stderr_truncated: r.stderr_truncated,
      artifacts: r.artifacts.map((a) =>
        mcpArtifact(this.#d.signer, rec.session_id, { path: a.path, size: a.size_bytes, mimeType: a.mime_type }),
      ),
      duration_ms: r.duration_ms,
      ...(r.value !== undefined ? { value: r.value } : {}),
      ...(r.message !== undefined ? { message: r.message } : {}),
      ...(r.resumed !== undefined ? { resumed: r.resumed } : {}),
      ...(r.tests !== undefined ? { tests: r.tests } : {}),
    };
  }
}

/** A progress message for one event of the run: its phase, output, a file it made or a test that ended. */
function describe(ev: StoredEvent): string {
  const data = JSON.parse(ev.data) as {
    phase?: string;
    text?: string;
    artifact?: { path: string };
    name?: string;
    passed?: boolean;
    skipped?: boolean;
  };
  if (ev.type === 'phase') return `phase: ${data.phase}`;
  if (ev.type === 'resumed') {
    return `resumed: the paused session came back in ${(data as { duration_ms?: number }).duration_ms} ms`;
  }
  if (ev.type === 'test_result') {
    return `test: ${data.name} ${data.skipped ? 'skipped' : data.passed ? 'passed' : 'failed'}`;
  }
  if (ev.type === 'artifact') return `artifact: ${sandboxPath(data.artifact?.path ?? '')}`;
  const text = data.text ?? '';
  return `${ev.type}: ${text.length > PROGRESS_TEXT_CHARS ? `${text.slice(0, PROGRESS_TEXT_CHARS)}…` : text}`;
}
