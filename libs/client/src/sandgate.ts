import { createClient, createConfig, type Client } from './generated/client/index.js';
import {
  createSession,
  createSnapshot,
  createVolume,
  deleteSnapshot,
  forkSession,
  getExecution,
  getSessionMetrics,
  listFiles,
  listVolumeFiles,
  listTemplates,
  listSnapshots,
  listVolumes,
  pauseSession,
  putFile,
  putVolumeFile,
  restoreSnapshot,
  resumeSession,
  runExecution,
  undoRun,
} from './generated/sdk.gen.js';
import type {
  CreateExecution,
  CreateSession,
  CreateVolume,
  Execution,
  FileEntry,
  FileEventStreamEvent,
  Session,
  SessionMetrics,
  SessionPause,
  SessionResume,
  SessionUndo,
  Snapshot,
  Template,
  Volume,
} from './generated/types.gen.js';
import { SandgateApiError, errorOf } from './errors.js';
import { tailEvents, type TailOptions } from './events.js';
import { bodyOf, saveTo, type UploadSource } from './files.js';
import { watchMetrics, type WatchMetricsOptions } from './metrics.js';
import { openTerminalSocket, type TerminalOptions } from './terminal.js';
import type WebSocket from 'ws';

export interface SandgateOptions {
  /** The gateway's URL (SANDGATE_PUBLIC_URL), e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** An API key (SANDGATE_API_KEYS); none for a gateway in open mode. */
  apiKey?: string;
  /** A fetch of your own (proxies, tests); default: the global fetch. */
  fetch?: typeof fetch;
}

export interface RunOptions {
  /** Seconds to wait for the result in all; default 300. */
  timeoutSeconds?: number;
  signal?: AbortSignal;
}

const TERMINAL = new Set(['completed', 'failed', 'timeout', 'cancelled', 'error']);
/** The longest ?wait= the API takes per request. */
const MAX_WAIT_S = 300;

/** What a generated call answers; its `error` becomes a SandgateApiError. */
async function ok<T>(call: Promise<{ data?: T; error?: unknown; response?: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (error !== undefined || !response?.ok) throw new SandgateApiError(response?.status ?? 0, (error ?? null) as never);
  return data as T;
}

/** Every item of a paged file listing. */
async function allPages(
  page: (cursor: string | undefined) => Promise<{ files: FileEntry[]; next_cursor: string | null }>,
): Promise<FileEntry[]> {
  const all: FileEntry[] = [];
  let cursor: string | undefined;
  do {
    const next = await page(cursor);
    all.push(...next.files);
    cursor = next.next_cursor ?? undefined;
  } while (cursor !== undefined);
  return all;
}

/**
 * sandgate's client: the generated SDK (`sdk`, every operation of openapi/openapi.json), plus what generators do not
 * do: `run()` that waits for the result, `events()` that tails a run and resumes after a dropped connection,
 * `upload()` from a path, a stream or a Blob, `download()` to a file.
 */
export class Sandgate {
  /** The generated client, configured: pass it as `client` to any function of the generated SDK. */
  readonly client: Client;
  readonly #baseUrl: string;
  readonly #apiKey: string | undefined;
  readonly #fetchFn: typeof fetch;

  constructor({ baseUrl, apiKey, fetch: fetchFn = globalThis.fetch }: SandgateOptions) {
    this.#baseUrl = baseUrl.replace(/\/+$/, '');
    this.#apiKey = apiKey;
    this.#fetchFn = fetchFn;
    this.client = createClient(
      createConfig({ baseUrl: this.#baseUrl, fetch: fetchFn, ...(apiKey ? { auth: apiKey } : {}) }),
    );
  }

  createSession(body: CreateSession = {}): Promise<Session> {
    return ok(createSession({ client: this.client, body }));
  }

  /**
   * Pauses a session: its sandbox goes (no memory, no CPU), its files stay, a stateful session's variables are saved
   * (`variables` says which could not be). Its next run, or resume(), brings it back. `discardVariables`: pause even
   * when the variables are too large to save (413 state_too_large otherwise); they are lost.
   */
  pause(sessionId: string, { discardVariables = false } = {}): Promise<SessionPause> {
    const body = discardVariables ? { discard_variables: true } : {};
    return ok(pauseSession({ client: this.client, path: { id: sessionId }, body }));
  }

  /** Brings a paused session back now, in a new sandbox; `resumed` is null when it was not paused. */
  resume(sessionId: string): Promise<SessionResume> {
    return ok(resumeSession({ client: this.client, path: { id: sessionId } }));
  }

  /** `count` (1 to 10) copies of a session's files and variables, paused until their first run; the source goes on. */
  async fork(
    sessionId: string,
    { count = 1, metadata }: { count?: number; metadata?: Record<string, string> } = {},
  ): Promise<Session[]> {
    const body = { count, ...(metadata ? { metadata } : {}) };
    return (await ok(forkSession({ client: this.client, path: { id: sessionId }, body }))).sessions;
  }

  /** Keeps the session's files (and a stateful session's variables) as they are now, as the snapshot `name`. */
  snapshot(sessionId: string, name: string): Promise<Snapshot> {
    return ok(createSnapshot({ client: this.client, path: { id: sessionId }, body: { name } }));
  }

  /** The session's snapshots, oldest first. */
  async snapshots(sessionId: string): Promise<Snapshot[]> {
    return (await ok(listSnapshots({ client: this.client, path: { id: sessionId } }))).snapshots;
  }

  /**
   * Rolls the session back to its snapshot `name` (it comes back, paused, at its next run), or with `intoNew` makes a
   * new session from it and leaves this one as it is. Answers the session rolled back, or the new one.
   */
  async restoreSnapshot(sessionId: string, name: string, { intoNew = false } = {}): Promise<Session> {
    const query = intoNew ? { into: 'new' as const } : {};
    return (await ok(restoreSnapshot({ client: this.client, path: { id: sessionId, name }, query }))).session;
  }

  async deleteSnapshot(sessionId: string, name: string): Promise<void> {
    await ok(deleteSnapshot({ client: this.client, path: { id: sessionId, name } }));
  }

  /** Brings the session's files back to how they were before its last run; again goes one run further back. */
  undo(sessionId: string): Promise<SessionUndo> {
    return ok(undoRun({ client: this.client, path: { id: sessionId } }));
  }

  /** Runs code and waits for its result (waiting in ?wait= slices, so no request outlives a proxy's timeout). */
  async run(body: CreateExecution, { timeoutSeconds = 300, signal }: RunOptions = {}): Promise<Execution> {
    const deadline = Date.now() + timeoutSeconds * 1000;
    const wait = () => Math.max(0, Math.min(MAX_WAIT_S, Math.ceil((deadline - Date.now()) / 1000)));
    let execution = await ok(
      runExecution({ client: this.client, body, query: { wait: wait() }, ...(signal ? { signal } : {}) }),
    );
    while (!TERMINAL.has(execution.state) && Date.now() < deadline && !signal?.aborted) {
      execution = await ok(
        getExecution({
          client: this.client,
          path: { id: execution.id },
          query: { wait: wait() },
          ...(signal ? { signal } : {}),
        }),
      );
    }
    return execution;
  }

  /** The events of an execution as they happen, resuming with Last-Event-ID after a dropped connection. */
  events(executionId: string, opts: TailOptions = {}) {
    const url = `${this.#baseUrl}/v1/executions/${encodeURIComponent(executionId)}/events`;
    return tailEvents(
      (headers, signal) => this.#fetchFn(url, { headers: { ...this.#auth(), ...headers }, signal }),
      opts,
    );
  }

  /** The session's CPU, memory, processes and disk now (nulls for the sandbox's figures while it has none). */
  metrics(sessionId: string): Promise<SessionMetrics> {
    return ok(getSessionMetrics({ client: this.client, path: { id: sessionId } }));
  }

  /** The session's figures about once a second, until it is deleted or `opts.signal` aborts. */
  watchMetrics(sessionId: string, opts: WatchMetricsOptions = {}): AsyncGenerator<SessionMetrics> {
    const url = `${this.#baseUrl}/v1/sessions/${encodeURIComponent(sessionId)}/metrics/stream`;
    return watchMetrics(
      (headers, signal) => this.#fetchFn(url, { headers: { ...this.#auth(), ...headers }, signal }),
      opts,
    );
  }

  /**
   * The file events of a session as they happen (`created`, `modified`, `deleted`, `overflow`, `missed`), resuming
   * with Last-Event-ID after a dropped connection, until `opts.signal` aborts. After `overflow` or `missed`, list the
   * files (`files()`) to know where they stand.
   */
  fileEvents(sessionId: string, opts: TailOptions = {}) {
    const url = `${this.#baseUrl}/v1/sessions/${encodeURIComponent(sessionId)}/files/events`;
    return tailEvents<FileEventStreamEvent>(
      (headers, signal) => this.#fetchFn(url, { headers: { ...this.#auth(), ...headers }, signal }),
      opts,
    );
  }

  /**
   * Uploads one file to `path` in the session (streamed: a file path or a stream is never read whole into memory).
   * `source` is a local file's path (`{ file: '…' }`), a stream, a Blob, bytes or a string.
   */
  async upload(sessionId: string, path: string, source: UploadSource, { overwrite = false } = {}): Promise<FileEntry> {
    const body = await bodyOf(source);
    const result = await ok(
      putFile({
        client: this.client,
        path: { id: sessionId, path },
        query: { overwrite },
        body: body as never,
        // A stream body needs half-duplex fetch (Node's undici insists on it).
        ...({ duplex: 'half' } as object),
      }),
    );
    return result.files[0]!;
  }

  /** Every file of a session, page after page. */
  async files(sessionId: string): Promise<FileEntry[]> {
    return allPages((cursor) => ok(listFiles({ client: this.client, path: { id: sessionId }, query: { cursor } })));
  }

  /** A volume: files that outlive sessions, mounted by the sessions made with `volumes: [{ name }]`. */
  createVolume(body: CreateVolume): Promise<Volume> {
    return ok(createVolume({ client: this.client, body }));
  }

  /** The templates this tenant may make sessions and one-shots of (`template` on createSession and run), by name. */
  async templates(): Promise<Template[]> {
    return (await ok(listTemplates({ client: this.client }))).templates;
  }

  /** The tenant's volumes, by name. */
  async volumes(): Promise<Volume[]> {
    return (await ok(listVolumes({ client: this.client }))).volumes;
  }

  /** Uploads one file to `path` in the volume `name`, streamed, as upload() does to a session. */
  async uploadToVolume(
    name: string,
    path: string,
    source: UploadSource,
    { overwrite = false } = {},
  ): Promise<FileEntry> {
    const body = await bodyOf(source);
    const result = await ok(
      putVolumeFile({
        client: this.client,
        path: { name, path },
        query: { overwrite },
        body: body as never,
        ...({ duplex: 'half' } as object),
      }),
    );
    return result.files[0]!;
  }

  /** Every file of a volume, page after page. */
  async volumeFiles(name: string): Promise<FileEntry[]> {
    return allPages((cursor) => ok(listVolumeFiles({ client: this.client, path: { name }, query: { cursor } })));
  }

  /**
   * Downloads a file to `dest` on disk (streamed) and answers its size: `from` is a `download_url` (signed: no key
   * needed) or `{ sessionId, path }`.
   */
  async download(from: string | { sessionId: string; path: string }, dest: string): Promise<number> {
    const url =
      typeof from === 'string'
        ? from
        : `${this.#baseUrl}/files/${encodeURIComponent(from.sessionId)}/${from.path.split('/').map(encodeURIComponent).join('/')}`;
    const response = await this.#fetchFn(url, { headers: this.#auth() });
    if (!response.ok || !response.body) throw await errorOf(response);
    return saveTo(response.body, dest);
  }

  /**
   * Opens a terminal in the session's sandbox: a login shell on a pty, over a websocket (the `ws` package's). Send
   * keys as binary messages (`ws.send(Buffer.from('ls\r'))`), read what the terminal shows from its binary messages,
   * resize it with resizeTerminal(). It closes with 1000 when the shell exits, 4409 when the session is paused, 4404
   * when it is deleted. A session without a sandbox gets one first.
   */
  terminal(sessionId: string, { cols = 80, rows = 24 }: TerminalOptions = {}): Promise<WebSocket> {
    const base = this.#baseUrl.replace(/^http/, 'ws');
    const url = `${base}/v1/sessions/${encodeURIComponent(sessionId)}/terminal?cols=${cols}&rows=${rows}`;
    return openTerminalSocket(url, this.#auth());
  }

  #auth(): Record<string, string> {
    return this.#apiKey ? { authorization: `Bearer ${this.#apiKey}` } : {};
  }
}
