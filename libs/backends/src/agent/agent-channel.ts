import { randomBytes } from 'node:crypto';
import { SandgateError } from '@sandgate/contracts';
import { PassThrough, type Duplex, type Readable } from 'node:stream';
import {
  encodeMessage,
  FrameDecoder,
  INTERRUPT,
  type AgentFrame,
  type AgentMessage,
  type DoneFrame,
  type ExitFrame,
  type ManifestEntry,
  type RunRequest,
  type ToolCallFrame,
} from './agent-frames.ts';
import { timerDelay } from '../run/timers.ts';

export interface RunHandlers {
  /** The agent took the run (the 'running' phase). */
  onStarted(): void;
  stdout(bytes: Buffer): void;
  stderr(bytes: Buffer): void;
  /** The run's code calls a tool; without a handler every call is refused. */
  toolCall?(call: ToolCallFrame): Promise<{ ok: true; result: unknown } | { ok: false; error: string }>;
}

export interface RunControl {
  timeoutMs: number;
  signal: AbortSignal;
  /** How long an interrupted run may take to end before `kill`; 0 kills at once. */
  interruptGraceMs: number;
  /** Kills the sandbox (its attach stream then ends). */
  kill(): Promise<void>;
}

export interface AgentRunEnd {
  /** The agent took the run: the code may have run. False: it surely did not. */
  started: boolean;
  /** The run's exit frame; undefined when the stream ended first (the agent died or was killed). */
  exit: ExitFrame | undefined;
  timedOut: boolean;
  cancelled: boolean;
  /** We killed the sandbox because the interrupt did not end the run in time (or no grace was given). */
  killed: boolean;
  /** From `started` to the end; 0 when it never started. */
  durationMs: number;
}

type RequestFrame = Extract<AgentFrame, { t: 'manifest' | 'chunk' | 'bytes' } | DoneFrame>;

/** What the agent said of a save of a stateful session's variables (its bytes went to the sink). */
export interface SavedState {
  size: number;
  saved: number;
  unsaved: { name: string; reason: string }[];
}

/** Where saved variables go as they come: `restart` drops what was written so far (the agent starts again). */
export interface StateSink {
  write(bytes: Buffer): Promise<void>;
  restart(): Promise<void>;
}

/** Bytes of saved variables per load_state message. */
export const STATE_CHUNK = 1 << 20;

const newId = (): string => randomBytes(6).toString('hex');

const stateTooLarge = (size: number, max: number): SandgateError =>
  new SandgateError(
    'state_too_large',
    `the interpreter's variables take more than ${max} bytes saved (SANDGATE_MAX_STATE_BYTES; ${size} so far): ` +
      'delete large ones (del df), or pause with discard_variables',
  );

interface Listener {
  frame(frame: AgentFrame): void;
  closed(): void;
}

/** A request the agent did not answer in time (`timeout`), or whose caller gave up on it (`cancelled`). */
export class AgentUnanswered extends Error {
  constructor(
    readonly why: 'timeout' | 'cancelled',
    message: string,
  ) {
    super(message);
  }
}

const MAX_DIAGNOSTICS = 2048;
/** The file requests of a channel, on one tree: the agent's workspace, or one volume of a volumes container. */
export interface FileChannel {
  manifest(timeoutMs: number, maxEntries?: number): Promise<AgentManifest>;
  put(path: string, source: Readable, mtimeMs: number, timeoutMs: number): Promise<void>;
  get(path: string, maxBytes: number, timeoutMs: number): { data: Readable; done: Promise<{ mtimeMs: number }> };
  remove(paths: string[], timeoutMs: number): Promise<void>;
}

const rooted = (root: string | undefined) => (root === undefined ? {} : { root });

/** Files a manifest lists at most: as many as a harvest looks at. */
export const MAX_MANIFEST_ENTRIES = 10_000;
/** Bytes of a file per `put` message: 1.3 MB of base64, well under the agent's and the decoder's line limits. */
const PUT_CHUNK = 768 * 1024;

/**
 * How a transport's bytes reach the channel: `frames` takes the agent's protocol bytes, `diagnostics` anything else
 * the agent wrote (a Docker attach multiplexes the two; a TCP connection carries frames only).
 */
export type Splitter = (
  frames: (bytes: Buffer) => void,
  diagnostics: (bytes: Buffer) => void,
) => (chunk: Buffer) => void;

/** The agent's files, as a manifest lists them: regular files only, none followed through a link. */
export interface AgentManifest {
  files: ManifestEntry[];
  /** More files than the agent lists in one manifest. */
  truncated: boolean;
}

/**
 * One connection to a sandbox running the agent (a Docker attach, or a TCP connection to a Kubernetes session Pod):
 * requests go to it, frames come back. One request is followed at a time.
 */
export class AgentChannel {
  readonly #stream: Duplex;
  #closed = false;
  #listener: Listener | undefined;
  #diagnostics = '';
  #onEnded: () => void = () => {};
  /** Resolves once the stream has ended. */
  readonly ended: Promise<void> = new Promise((resolve) => {
    this.#onEnded = resolve;
  });

  constructor(stream: Duplex, split: Splitter = (frames) => frames) {
    this.#stream = stream;
    const decoder = new FrameDecoder((frame) => this.#listener?.frame(frame));
    const push = split(
      (bytes) => decoder.push(bytes),
      (bytes) => this.#keep(bytes),
    );
    stream.on('data', (chunk: Buffer) => push(chunk));
    const closed = (): void => {
      if (this.#closed) return;
      this.#closed = true;
      this.#onEnded();
      this.#listener?.closed();
    };
    stream.once('end', closed);
    stream.once('close', closed);
    stream.on('error', closed);
  }

  /** The stream has ended: the sandbox stopped, or we detached. */
  get closed(): boolean {
    return this.#closed;
  }

  /** The last bytes the agent itself wrote to stderr (start-up failures), for messages and logs. */
  get diagnostics(): string {
    return this.#diagnostics;
  }

  /**
   * Resolves once the agent has answered a ping on this attach. Docker answers an attach a moment before it relays
   * the container's output to it, so a frame written in between is lost to us: pings are repeated, at growing
   * intervals, until one is answered. Sent before the agent runs (a new sandbox), they wait in its stdin. Rejects
   * when the sandbox ends or `timeoutMs` passes first.
   */
  handshake(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const sent = new Set<string>();
      let interval = 25;
      let resend: NodeJS.Timeout | undefined;
      const ping = (): void => {
        const id = randomBytes(6).toString('hex');
        sent.add(id);
        this.#send(encodeMessage({ op: 'ping', id }));
        resend = setTimeout(ping, interval);
        interval = Math.min(interval * 2, 1000);
      };
      const done = (err?: Error): void => {
        clearTimeout(deadline);
        clearTimeout(resend);
        this.#listener = undefined;
        if (err) reject(err);
        else resolve();
      };
      const deadline = setTimeout(
        () => done(new Error(`the sandbox agent did not answer within ${timeoutMs} ms`)),
        timerDelay(timeoutMs),
      );
      this.#listener = {
        frame: (frame) => {
          if (frame.t === 'pong' && frame.id !== null && sent.has(frame.id)) done();
        },
        closed: () => done(new Error(`the sandbox agent ended: ${this.#diagnostics.trim() || 'no output'}`)),
      };
      if (this.#closed) return this.#listener.closed();
      ping();
    });
  }

  /**
   * Sends one run and follows it to its exit frame, or to the end of the stream. On timeout or abort it asks the
   * agent to interrupt the run, and kills the sandbox if that has not ended it within the grace period.
   */
  run(request: RunRequest, handlers: RunHandlers, ctl: RunControl): Promise<AgentRunEnd> {
    return new Promise((resolve) => {
      let startedAt: number | undefined;
      let stopped: 'timeout' | 'cancelled' | undefined;
      let killed = false;
      let grace: NodeJS.Timeout | undefined;
      const finish = (exit: ExitFrame | undefined): void => {
        clearTimeout(timer);
        clearTimeout(grace);
        ctl.signal.removeEventListener('abort', onAbort);
        this.#listener = undefined;
        const durationMs = startedAt === undefined ? 0 : performance.now() - startedAt;
        resolve({
          started: startedAt !== undefined,
          exit,
          timedOut: stopped === 'timeout',
          cancelled: stopped === 'cancelled',
          killed,
          durationMs,
        });
      };
      const kill = (): void => {
        killed = true;
        // Detaching ends the run for us even if the engine cannot kill (it is then gone, or unreachable).
        void ctl
          .kill()
          .catch(() => {})
          .finally(() => this.close());
      };
      const stop = (why: 'timeout' | 'cancelled'): void => {
        if (stopped !== undefined) return;
        stopped = why;
        if (ctl.interruptGraceMs <= 0) return kill();
        this.#send(encodeMessage(INTERRUPT));
        grace = setTimeout(kill, timerDelay(ctl.interruptGraceMs));
      };
      const onAbort = (): void => stop('cancelled');
      this.#listener = {
        frame: (frame) => {
          // Frames before our `started` belong to an earlier run (a worker that died mid-run left it going).
          if (frame.t === 'started' && frame.id === request.id && startedAt === undefined) {
            startedAt = performance.now();
            handlers.onStarted();
          } else if (startedAt === undefined) {
            return;
          } else if (frame.t === 'out') {
            handlers.stdout(Buffer.from(frame.d, 'latin1'));
          } else if (frame.t === 'err') {
            handlers.stderr(Buffer.from(frame.d, 'latin1'));
          } else if (frame.t === 'exit' && frame.id === request.id) {
            finish(frame);
          } else if (frame.t === 'tool_call' && frame.id === request.id) {
            const answer = handlers.toolCall?.(frame) ?? Promise.resolve({ ok: false as const, error: 'no tools' });
            void answer
              .catch((err: unknown) => ({ ok: false as const, error: (err as Error).message }))
              .then((a) => this.#send(encodeMessage({ op: 'tool_result', call: frame.call, ...a })));
          }
        },
        closed: () => finish(undefined),
      };
      const timer = setTimeout(() => stop('timeout'), timerDelay(ctl.timeoutMs));
      ctl.signal.addEventListener('abort', onAbort, { once: true });
      if (this.#closed) return this.#listener.closed();
      this.#send(encodeMessage(request));
      if (ctl.signal.aborted) onAbort();
    });
  }

  /**
   * Asks the agent to reset the sandbox between two runs (see Reset), and resolves once it says it has. Rejects when
   * it reports a failure, the stream ends, or `timeoutMs` passes: the sandbox is then in no known state.
   */
  reset(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const id = randomBytes(6).toString('hex');
      const done = (err?: Error): void => {
        clearTimeout(deadline);
        this.#listener = undefined;
        if (err) reject(err);
        else resolve();
      };
      const deadline = setTimeout(
        () => done(new Error(`the sandbox agent did not finish its reset within ${timeoutMs} ms`)),
        timerDelay(timeoutMs),
      );
      this.#listener = {
        frame: (frame) => {
          if (frame.t !== 'reset' || frame.id !== id) return;
          done(frame.ok ? undefined : new Error(`the sandbox reset failed: ${frame.error ?? 'no reason given'}`));
        },
        closed: () => done(new Error('the sandbox ended during its reset')),
      };
      if (this.#closed) return this.#listener.closed();
      this.#send(encodeMessage({ op: 'reset', id }));
    });
  }

  /**
   * Lists the agent's workspace (Kubernetes session Pods, whose workspace is their own), at most `maxEntries` files: an
   * agent is on hostile ground (the session's code runs beside it), so what it sends is bounded here.
   */
  manifest(timeoutMs: number, maxEntries: number = MAX_MANIFEST_ENTRIES, root?: string): Promise<AgentManifest> {
    const files: ManifestEntry[] = [];
    let truncated = false;
    return this.#request({ op: 'manifest', id: newId(), ...rooted(root) }, timeoutMs, undefined, (frame, done) => {
      if (frame.t !== 'manifest') return;
      files.push(...frame.files.slice(0, maxEntries - files.length));
      truncated ||= frame.truncated === true || files.length >= maxEntries;
      if (!frame.more || files.length >= maxEntries) done(undefined, { files, truncated });
    });
  }

  /** Writes `source` to the agent's workspace at `path` (replacing what is there), with the given mtime. */
  async put(path: string, source: Readable, mtimeMs: number, timeoutMs: number, root?: string): Promise<void> {
    const id = newId();
    const answer = this.#request(undefined, timeoutMs, undefined, (frame, done) => {
      if (frame.t === 'done' && frame.id === id) done(frame.ok ? undefined : new Error(`${path}: ${frame.error}`));
    });
    // Sent as read: the agent answers once, after the last chunk (or at its first failure, which ends the wait).
    let pending: Buffer = Buffer.alloc(0);
    const sendChunk = (data: Buffer, last: boolean): void =>
      this.#send(
        encodeMessage({
          op: 'put',
          id,
          path,
          d: data.toString('base64'),
          last,
          ...(last ? { mtime_ms: mtimeMs } : {}),
          ...rooted(root),
        }),
      );
    let answered = false;
    answer.then(
      () => (answered = true),
      () => (answered = true),
    );
    try {
      for await (const chunk of source as AsyncIterable<Buffer>) {
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        while (pending.length >= PUT_CHUNK) {
          sendChunk(pending.subarray(0, PUT_CHUNK), false);
          pending = pending.subarray(PUT_CHUNK);
        }
        if (this.#closed || answered) break;
      }
      if (!answered) sendChunk(pending, true);
    } catch (err) {
      // The source failed: the agent gets an empty last chunk, and the file its (partial) contents; report the read.
      sendChunk(Buffer.alloc(0), true);
      await answer.catch(() => {});
      throw err;
    }
    await answer;
  }

  /**
   * Reads one file of the agent's workspace, at most `maxBytes`: its bytes as a stream (ended by the agent's `done`,
   * errored by a failure), and its mtime once it has all come.
   */
  get(
    path: string,
    maxBytes: number,
    timeoutMs: number,
    root?: string,
  ): { data: Readable; done: Promise<{ mtimeMs: number }> } {
    const data = new PassThrough();
    // A failure is `done`'s to report; a reader that has not started yet still sees it (the stream keeps its error).
    data.on('error', () => {});
    let received = 0;
    const done = this.#request<{ mtimeMs: number }>(
      { op: 'get', id: newId(), path, max: maxBytes, ...rooted(root) },
      timeoutMs,
      undefined,
      (frame, finish) => {
        if (frame.t === 'chunk') {
          const bytes = Buffer.from(frame.d, 'base64');
          received += bytes.length;
          if (received > maxBytes) return finish(new Error(`${path}: more than the ${maxBytes} bytes announced`));
          // The reader (a file being written) sets the pace: the connection waits while it is behind, so a large
          // file never piles up in this process.
          if (!data.write(bytes)) {
            this.#stream.pause();
            data.once('drain', () => this.#stream.resume());
          }
        } else if (frame.t === 'done') {
          if (frame.ok) finish(undefined, { mtimeMs: frame.mtime_ms ?? Date.now() });
          else finish(new Error(`${path}: ${frame.error}`));
        }
      },
    );
    done.then(
      () => data.end(),
      (err: Error) => data.destroy(err),
    );
    done.finally(() => this.#stream.resume()).catch(() => {});
    return { data, done };
  }

  /** Removes files from the agent's workspace; missing ones are fine. */
  remove(paths: string[], timeoutMs: number, root?: string): Promise<void> {
    return this.#request({ op: 'delete', id: newId(), paths, ...rooted(root) }, timeoutMs, undefined, (frame, done) => {
      if (frame.t === 'done') done(frame.ok ? undefined : new Error(`could not remove: ${frame.error}`));
    });
  }

  /**
   * Saves the stateful interpreter's variables (at most `maxBytes`) into `sink`, which sets the pace: the connection
   * waits while it writes. Rejects with `state_too_large` (code) past the limit, or with what the agent said.
   */
  saveState(sink: StateSink, maxBytes: number, timeoutMs: number, signal?: AbortSignal): Promise<SavedState> {
    let writing: Promise<void> = Promise.resolve();
    let received = 0;
    const request = { op: 'save_state', id: newId(), max: maxBytes } as const;
    return this.#request<SavedState>(request, timeoutMs, signal, (frame, done) => {
      if (frame.t === 'bytes') {
        received = frame.restart ? 0 : received + frame.data.length;
        if (received > maxBytes) return done(stateTooLarge(received, maxBytes));
        this.#stream.pause();
        writing = writing
          .then(() => (frame.restart ? sink.restart() : sink.write(frame.data)))
          .finally(() => this.#stream.resume());
        writing.catch((err: Error) => done(err));
      } else if (frame.t === 'done') {
        if (!frame.ok) {
          return done(
            frame.error === 'state_too_large'
              ? stateTooLarge(frame.size ?? received, maxBytes)
              : new Error(frame.error),
          );
        }
        const unsaved = (frame.unsaved ?? []).map(([name, reason]) => ({ name, reason }));
        writing.then(
          () => done(undefined, { size: received, saved: frame.saved ?? 0, unsaved }),
          (err: Error) => done(err),
        );
      }
    });
  }

  /**
   * Loads variables saved by saveState into the stateful interpreter; answers how many it has then. Unpickling runs
   * the session's own code, which may never end: the whole load, waits for the connection included, rejects at
   * `timeoutMs` (StateTimeout) or when `signal` aborts, and the interpreter is then in no known state.
   */
  async loadState(source: Readable, timeoutMs: number, signal?: AbortSignal): Promise<{ restored: number }> {
    const id = newId();
    let settled = false;
    const answer = this.#request<{ restored: number }>(undefined, timeoutMs, signal, (frame, done) => {
      if (frame.t !== 'done' || frame.id !== id) return;
      done(frame.ok ? undefined : new Error(frame.error ?? 'the variables could not be loaded'), {
        restored: frame.restored ?? 0,
      });
    });
    const over = answer.then(
      () => void (settled = true),
      () => void (settled = true),
    );
    const send = async (data: Buffer, last: boolean): Promise<void> => {
      const head = encodeMessage({ op: 'load_state', id, n: data.length, last });
      if (this.#closed || settled) return;
      // The agent reads ahead a few chunks, then waits for the interpreter: its pace is the pace of this stream, and
      // a load that never ends (or a deadline, or an abort) ends the wait.
      if (!this.#stream.write(head) || !this.#stream.write(data)) {
        let go = (): void => {};
        await Promise.race([
          over,
          new Promise<void>((resolve) => {
            go = resolve;
            this.#stream.once('drain', go);
            this.#stream.once('close', go);
          }),
        ]);
        this.#stream.off('drain', go);
        this.#stream.off('close', go);
      }
    };
    // The source's chunks are gathered until they make a message and joined once: every byte is copied at most once
    // (a file read with a highWaterMark of STATE_CHUNK is not copied at all).
    let parts: Buffer[] = [];
    let gathered = 0;
    for await (const chunk of source as AsyncIterable<Buffer>) {
      parts.push(chunk);
      gathered += chunk.length;
      if (gathered < STATE_CHUNK) continue;
      let joined = parts.length === 1 ? parts[0]! : Buffer.concat(parts, gathered);
      while (joined.length >= STATE_CHUNK && !settled) {
        await send(joined.subarray(0, STATE_CHUNK), false);
        joined = joined.subarray(STATE_CHUNK);
      }
      parts = joined.length > 0 ? [joined] : [];
      gathered = joined.length;
      if (settled) break;
    }
    await send(parts.length === 1 ? parts[0]! : Buffer.concat(parts, gathered), true);
    return answer;
  }

  /** Sends `message` (when given) and feeds the frames of its id to `onFrame` until it calls done. */
  #request<T = void>(
    message: AgentMessage | undefined,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    onFrame: (frame: RequestFrame, done: (err?: Error, value?: T) => void) => void,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const id = message && 'id' in message ? message.id : undefined;
      const onAbort = (): void => done(new AgentUnanswered('cancelled', 'the request was cancelled'));
      const done = (err?: Error, value?: T): void => {
        clearTimeout(deadline);
        signal?.removeEventListener('abort', onAbort);
        if (this.#listener === listener) this.#listener = undefined;
        if (err) reject(err);
        else resolve(value as T);
      };
      const deadline = setTimeout(
        () => done(new AgentUnanswered('timeout', `the sandbox agent did not answer within ${timeoutMs} ms`)),
        timerDelay(timeoutMs),
      );
      const listener: Listener = {
        frame: (frame) => {
          if (frame.t !== 'manifest' && frame.t !== 'chunk' && frame.t !== 'bytes' && frame.t !== 'done') return;
          if (id !== undefined && frame.id !== id) return;
          onFrame(frame, done);
        },
        closed: () => done(new Error(`the sandbox ended: ${this.#diagnostics.trim() || 'the connection closed'}`)),
      };
      this.#listener = listener;
      if (this.#closed) return listener.closed();
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      if (message) this.#send(encodeMessage(message));
    });
  }

  /** The file requests of this channel, under `root` (a volume's mount path; absent: the agent's workspace). */
  files(root?: string): FileChannel {
    return {
      manifest: (timeoutMs, maxEntries) => this.manifest(timeoutMs, maxEntries, root),
      put: (path, source, mtimeMs, timeoutMs) => this.put(path, source, mtimeMs, timeoutMs, root),
      get: (path, maxBytes, timeoutMs) => this.get(path, maxBytes, timeoutMs, root),
      remove: (paths, timeoutMs) => this.remove(paths, timeoutMs, root),
    };
  }

  /** Sends a line as it is (a transport's own greeting, before any request). */
  sendRaw(line: string): void {
    this.#send(line);
  }

  /** Detaches (Docker: the sandbox lives on, its stdin stays open as StdinOnce is false) or hangs up. */
  close(): void {
    this.#stream.destroy();
  }

  #send(line: string): void {
    if (!this.#closed) this.#stream.write(line);
  }

  #keep(bytes: Buffer): void {
    this.#diagnostics = (this.#diagnostics + bytes.toString('utf8')).slice(-MAX_DIAGNOSTICS);
  }
}
