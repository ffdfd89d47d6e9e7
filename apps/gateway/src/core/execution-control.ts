import { Readable } from 'node:stream';
import {
  LANGUAGES,
  SandgateError,
  isTerminal,
  type CreateExecution,
  type ExecutionJob,
  type Language,
} from '@sandgate/contracts';
import {
  MAX_PRIORITY,
  endedRecord,
  endingOf,
  newExecutionId,
  newSessionId,
  platformResult,
  type ExecutionMeta,
  type ExecutionRecord,
  type NoticeWait,
  type SessionRecord,
  type SessionTemplate,
  type StartOptions,
} from '@sandgate/state';
import { egressEntries, limitsFor, maxInFlight } from '@sandgate/config';
import { HostAllowList } from '@sandgate/outbound';
import { normalizeUserPath, writeFileInside } from '@sandgate/storage';
import type { GatewayDeps } from '../deps.ts';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/** Inline files are decoded in memory, so they get a tighter bound than streamed uploads. */
export const MAX_INLINE_BYTES = 10 << 20;

type InlineFile = { path: string; bytes: Buffer };

/** The languages test mode runs, with their usual framework (images/runtime/agent/sandgate-test). */
const TEST_LANGUAGES = ['python', 'javascript', 'typescript'] as const;

/** Creating, waiting for and cancelling executions: the logic behind /v1/executions, free of HTTP. */
export class ExecutionControl {
  /** Settles when the gateway starts to shut down: a long poll then answers with the run as it is. */
  readonly #drained: Promise<'timeout'>;
  readonly #webhooks: HostAllowList;

  readonly #d: GatewayDeps;
  constructor(d: GatewayDeps) {
    this.#d = d;
    this.#webhooks = new HostAllowList(d.config.webhookAllow, 'SANDGATE_WEBHOOK_ALLOW');
    this.#drained = new Promise((resolve) => {
      d.draining.addEventListener('abort', () => resolve('timeout'), { once: true });
    });
  }

  /**
   * Validates, takes the session's lock (creating the session for a one-shot), writes inline files, enqueues;
   * with `waitSeconds`, waits up to that long for the run to end. Returns the record as it then is.
   */
  async create(
    tenant: string,
    body: CreateExecution,
    waitSeconds = 0,
    options: { service?: string } = {},
  ): Promise<ExecutionRecord> {
    // A session the platform is pausing by itself (idle) is not the user's conflict: the run waits for the pause to
    // end, within its own time limit, and then resumes the session as any run of a paused session does.
    const deadline = Date.now() + (body.timeout_ms ?? this.#d.config.execTimeoutMs);
    for (;;) {
      try {
        return await this.#createOnce(tenant, body, waitSeconds, options);
      } catch (err) {
        const busy = err instanceof SandgateError && err.code === 'session_busy' && body.session_id !== undefined;
        if (!busy || !(await this.#d.sessions.waitOutAutoOp(body.session_id!, deadline))) throw err;
      }
    }
  }

  async #createOnce(
    tenant: string,
    body: CreateExecution,
    waitSeconds: number,
    { service }: { service?: string },
  ): Promise<ExecutionRecord> {
    const { config } = this.#d;
    const job = this.#validate(body, await this.#source(tenant, body));
    if (body.callback_url !== undefined) this.#checkCallback(body.callback_url);
    const files = (body.files ?? []).map((f) => ({
      path: normalizeUserPath(f.path),
      bytes: Buffer.from(f.content_base64, 'base64'),
    }));
    const inline = files.reduce((n, f) => n + f.bytes.length, 0);
    if (inline > Math.min(MAX_INLINE_BYTES, config.maxUploadBytes)) {
      throw new SandgateError(
        'payload_too_large',
        `inline files total ${inline} bytes; upload large files with POST /v1/sessions/{id}/files`,
      );
    }
    const session = body.session_id ? await this.#d.sessions.require(tenant, body.session_id) : null;
    const template = await this.#templateOf(tenant, body, session);
    if (template) withTemplate(job, body, template);
    const sandbox = !session ? 'oneshot' : session.mode === 'stateful' ? 'stateful' : 'session';
    if (sandbox === 'stateful' && job.args !== undefined) {
      throw new SandgateError(
        'validation_failed',
        `session ${session!.id} is stateful: its runs are cells, without arguments`,
      );
    }
    if (sandbox === 'stateful' && job.language !== 'python' && service === undefined) {
      throw new SandgateError(
        'unsupported_language',
        `session ${session!.id} is stateful, which runs python only; use a process session for ${job.language}`,
      );
    }
    const id = newExecutionId();
    const sessionId = session?.id ?? newSessionId();
    const meta = {
      id,
      tenant,
      session_id: sessionId,
      language: job.language,
      created_at: Date.now(),
      timeout_ms: job.timeout_ms,
    };
    const data: ExecutionJob = {
      ...job,
      execution_id: id,
      tenant,
      session_id: sessionId,
      ...(session ? this.sandboxOf(session) : { sandbox, generation: 0 }),
      // The run starts `code` as a service of the session (ServiceManager), a program of its own in any session.
      ...(service === undefined ? {} : { service }),
    };
    const ending = waitSeconds > 0 ? this.#d.notices.expect(id) : null;
    try {
      const limits = limitsFor(config, tenant);
      // A tenant at its storage quota runs nothing more (runs write files) until it deletes files or sessions: checked
      // by the start itself, with no round trip of its own.
      const start: StartOptions = {
        maxSessions: config.maxSessions,
        maxInFlight: maxInFlight(limits),
        maxStorageBytes: limits.storage_bytes,
        ...(session ? {} : { oneshotTtlSeconds: config.sessionTtlSeconds }),
        ...(ending ? { notify: this.#d.notices.channel } : {}),
      };
      await this.#startAndEnqueue(meta, data, start, files, body.callback_url);
      // A one-shot's session keeps its template, should a later run use the session.
      if (!session && template) await this.#d.sessions.setTemplate(sessionId, template);
      const record: ExecutionRecord = {
        ...meta,
        state: 'queued',
        started_at: null,
        finished_at: null,
        result: null,
        callback_url: body.callback_url ?? null,
        webhook: body.callback_url === undefined ? null : { state: 'pending', attempts: [] },
      };
      return ending ? await this.#until(record, ending, Date.now() + waitSeconds * 1000) : record;
    } finally {
      ending?.cancel();
    }
  }

  /**
   * What a session's record says of the sandbox its runs get: its kind, its generation, its network (egress where its
   * tenant is allowed it, unless it holds private data), whether it comes back from a pause (the run says so), and
   * the undo step to keep before the run. A resume without a run (POST …/resume) asks for the same sandbox.
   */
  sandboxOf(
    session: SessionRecord,
  ): Pick<ExecutionJob, 'sandbox' | 'generation' | 'network' | 'paused_at' | 'undo' | 'volumes'> {
    const { config } = this.#d;
    return {
      sandbox: session.mode === 'stateful' ? 'stateful' : 'session',
      generation: session.generation,
      ...(!session.private && egressEntries(config.egress, session.tenant).length > 0
        ? { network: 'egress' as const }
        : {}),
      ...(session.pausedAt !== null ? { paused_at: session.pausedAt } : {}),
      ...(session.undo !== 'off' && config.undoDepth > 0 ? { undo: session.undo } : {}),
      ...(session.volumes.length > 0 ? { volumes: session.volumes } : {}),
    };
  }

  /** Waits for the notice of the run's end; reads the run when a notice may have been missed, and at the deadline. */
  async #until(rec: ExecutionRecord, ending: NoticeWait, deadline: number): Promise<ExecutionRecord> {
    for (;;) {
      const notice = await Promise.race([ending.next(deadline), this.#drained]);
      if (typeof notice === 'object') return endedRecord(rec, notice);
      const now = await this.#d.executions.get(rec.id);
      if (notice === 'timeout' || !now || isTerminal(now.state)) return now ?? rec;
    }
  }

  /**
   * Records the run (its session's lock taken), writes its inline files, then enqueues its id at the rank the start
   * gave it in its tenant's queue. Whatever fails after the start ends the run, so nothing stays queued without a
   * job; a gateway that dies in between leaves a queued run that housekeeping ends (worker.ts).
   */
  async #startAndEnqueue(
    meta: ExecutionMeta,
    data: ExecutionJob,
    start: StartOptions,
    files: InlineFile[],
    callbackUrl?: string,
  ): Promise<void> {
    const { config } = this.#d;
    const rank = await this.#d.executions.start(meta, data, start);
    try {
      if (callbackUrl !== undefined) await this.#d.executions.setCallback(meta.id, callbackUrl);
      if (files.length > 0) {
        const dir = await this.#d.workspaces.create(meta.session_id);
        for (const f of files) {
          await writeFileInside(dir, f.path, Readable.from([f.bytes]), {
            maxBytes: config.maxUploadBytes,
            overwrite: true,
            owner: { uid: config.sandboxUid, gid: config.sandboxUid },
          });
        }
      }
      // BullMQ runs lower priorities first: a tenant's first queued run goes before another's hundredth.
      const priority = Math.min(rank, MAX_PRIORITY);
      await this.#d.queue.add('execute', { execution_id: meta.id, tenant: meta.tenant }, { jobId: meta.id, priority });
    } catch (err) {
      await this.#failToQueue(meta, err);
    }
  }

  /**
   * The template a run uses: its session's, as resolved when the session was made, or for a one-shot the one it names,
   * resolved now. A run cannot name another template than its session's.
   */
  async #templateOf(
    tenant: string,
    body: CreateExecution,
    session: SessionRecord | null,
  ): Promise<SessionTemplate | null> {
    if (session) {
      if (body.template !== undefined && body.template !== session.template?.name) {
        const has = session.template ? `template "${session.template.name}"` : 'the runtime image';
        throw new SandgateError(
          'validation_failed',
          `session ${session.id} runs ${has}; a session's runs use the template it was made with`,
        );
      }
      return session.template;
    }
    return body.template === undefined ? null : this.#d.templateControl.resolve(tenant, body.template);
  }

  /** Ends a started run that could not be queued, then rethrows why. */
  async #failToQueue(meta: ExecutionMeta, err: unknown): Promise<never> {
    const reason = err instanceof SandgateError ? undefined : 'backend_unavailable';
    await this.#d.executions.finalize(
      meta,
      platformResult('error', reason, `could not queue the execution: ${(err as Error).message}`),
      ['queued'],
    );
    throw err;
  }

  /** What to run: the request's `language` and `code`, or those of the tenant's saved `script`. */
  async #source(tenant: string, body: CreateExecution): Promise<{ language: string; code: string }> {
    const bad = (detail: string) => new SandgateError('validation_failed', detail);
    if (body.script !== undefined) {
      if (body.code !== undefined || body.language !== undefined) {
        throw bad('give script, or language and code, not both (a script runs in its own language)');
      }
      const script = await this.#d.scriptLibrary.require(tenant, body.script);
      return { language: script.language, code: script.code };
    }
    if (body.code === undefined || body.language === undefined) throw bad('give language and code, or script');
    return { language: body.language, code: body.code };
  }

  #validate(
    body: CreateExecution,
    { language, code }: { language: string; code: string },
  ): Omit<ExecutionJob, 'execution_id' | 'tenant' | 'session_id' | 'sandbox' | 'generation'> {
    const { config } = this.#d;
    if (!(LANGUAGES as readonly string[]).includes(language)) {
      throw new SandgateError(
        'unsupported_language',
        `language "${language}" is not offered here; use one of: ${LANGUAGES.join(', ')} (GET /v1/runtimes)`,
      );
    }
    const codeBytes = Buffer.byteLength(code, 'utf8');
    if (codeBytes > config.maxCodeBytes) {
      throw new SandgateError(
        'payload_too_large',
        `code is ${codeBytes} bytes; the limit is ${config.maxCodeBytes} bytes`,
      );
    }
    const bad = (detail: string) => new SandgateError('validation_failed', detail);
    const timeout = body.timeout_ms ?? config.execTimeoutMs;
    if (timeout > config.execTimeoutMs)
      throw bad(`timeout_ms ${timeout} exceeds this deployment's maximum of ${config.execTimeoutMs}`);
    const memory = body.limits?.memory_mb ?? config.memoryMb;
    if (memory > config.memoryMb)
      throw bad(`limits.memory_mb ${memory} exceeds this deployment's maximum of ${config.memoryMb}`);
    const cpus = body.limits?.cpus ?? config.cpus;
    if (cpus > config.cpus) throw bad(`limits.cpus ${cpus} exceeds this deployment's maximum of ${config.cpus}`);
    const env = body.env ?? {};
    const badName = Object.keys(env).find((n) => !ENV_NAME.test(n));
    if (badName !== undefined) throw bad(`env name "${badName}" must match ${ENV_NAME.source}`);
    if (body.stdin !== undefined && Buffer.byteLength(body.stdin) > config.maxUploadBytes) {
      throw new SandgateError('payload_too_large', 'stdin is larger than SANDGATE_MAX_UPLOAD_BYTES');
    }
    const test = this.#testMode(body, language);
    return {
      language: language as Language,
      code,
      ...test,
      ...(body.args !== undefined && body.args.length > 0 ? { args: body.args } : {}),
      ...(body.keep_code === true ? { keep_code: true } : {}),
      timeout_ms: timeout,
      memory_mb: memory,
      cpus,
      env,
      stdin: body.stdin ?? null,
    };
  }

  /** Test mode's fields, checked: `tests` with `mode: "test"` only, in a language with a test framework here. */
  #testMode(body: CreateExecution, language: string): { mode?: 'test'; tests?: string } {
    const bad = (detail: string) => new SandgateError('validation_failed', detail);
    if (body.mode !== 'test') {
      if (body.tests !== undefined) throw bad('tests are run with "mode": "test"');
      return {};
    }
    if (!(TEST_LANGUAGES as readonly string[]).includes(language)) {
      throw new SandgateError(
        'unsupported_language',
        `test mode runs ${TEST_LANGUAGES.join(', ')} (pytest, node:test); not ${language}`,
      );
    }
    if (body.tests === undefined || body.tests.trim() === '') throw bad('test mode needs "tests": the tests to run');
    if (body.args !== undefined && body.args.length > 0) throw bad('test mode takes no args');
    const bytes = Buffer.byteLength(body.tests, 'utf8');
    if (bytes > this.#d.config.maxCodeBytes) {
      throw new SandgateError(
        'payload_too_large',
        `tests are ${bytes} bytes; the limit is ${this.#d.config.maxCodeBytes} bytes`,
      );
    }
    return { mode: 'test', tests: body.tests };
  }

  /** A callback_url must point where SANDGATE_WEBHOOK_ALLOW allows (its addresses are checked again at delivery). */
  #checkCallback(url: string): void {
    const refused = this.#webhooks.enabled
      ? this.#webhooks.refuseUrl(url)
      : 'this gateway sends no webhooks (SANDGATE_WEBHOOK_ALLOW is empty)';
    if (refused) throw new SandgateError('webhook_not_allowed', `callback_url refused: ${refused}`);
  }

  /** Waits up to `seconds` for the run to end; returns the record as it then is. */
  async wait(rec: ExecutionRecord, seconds: number): Promise<ExecutionRecord> {
    if (isTerminal(rec.state) || seconds <= 0) return rec;
    const key = this.#d.executions.eventsKey(rec.id);
    // The stream's last id is read before the state (one connection, in order): finalisation writes both at
    // once, so either the state is already terminal or the result event comes after `newest`.
    const [[newest], now] = await Promise.all([
      this.#d.redis.xrevrange(key, '+', '-', 'COUNT', 1) as Promise<[string, string[]][]>,
      this.#d.executions.get(rec.id),
    ]);
    if (!now || isTerminal(now.state)) return now ?? rec;
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), seconds * 1000);
    try {
      const stop = AbortSignal.any([ac.signal, this.#d.draining]);
      for await (const ev of this.#d.hub.subscribe(key, newest?.[0] ?? null, stop)) {
        const ending = endingOf(ev);
        if (ending) return endedRecord(now, ending);
        if (ev.type === 'result') break;
      }
    } finally {
      clearTimeout(timer);
    }
    return (await this.#d.executions.get(rec.id)) ?? now;
  }

  /**
   * Cancels a run. A queued one ends here and now; a running one is killed by the worker that holds
   * it (told through Redis pub/sub, with a flag for a worker that has yet to pick it up). Waits up to
   * `waitSeconds` for the run to end.
   */
  async cancel(rec: ExecutionRecord, waitSeconds = 10): Promise<ExecutionRecord> {
    if (isTerminal(rec.state)) return rec;
    await this.#d.executions.requestCancel(rec.id);
    const ended = await this.#d.executions.finalize(
      rec,
      platformResult('cancelled', 'cancelled', 'cancelled before it started'),
      ['queued'],
    );
    if (ended) await this.#d.queue.remove(rec.id).catch(() => 0);
    return this.wait((await this.#d.executions.get(rec.id)) ?? rec, waitSeconds);
  }
}

/**
 * A run of a template: its image, its env under the run's own, and its default limits where the request gives none
 * (a template's limits are within the deployment's, checked when it was made).
 */
export function withTemplate(
  job: Pick<ExecutionJob, 'timeout_ms' | 'memory_mb' | 'cpus' | 'env' | 'template' | 'image'>,
  body: Pick<CreateExecution, 'timeout_ms' | 'limits'>,
  t: SessionTemplate,
): void {
  job.template = t.name;
  job.image = t.image;
  job.env = { ...t.env, ...job.env };
  if (body.timeout_ms === undefined && t.limits.timeout_ms !== undefined) job.timeout_ms = t.limits.timeout_ms;
  if (body.limits?.memory_mb === undefined && t.limits.memory_mb !== undefined) job.memory_mb = t.limits.memory_mb;
  if (body.limits?.cpus === undefined && t.limits.cpus !== undefined) job.cpus = t.limits.cpus;
}
