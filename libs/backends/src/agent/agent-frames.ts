import type { Language } from '@sandgate/contracts';

/** What the agent sends, one JSON object per line (images/runtime/agent/sandgate_agent.py). */
export type AgentFrame =
  | { t: 'ready' }
  | { t: 'pong'; id: string | null }
  | { t: 'started'; id: string | null }
  | { t: 'out' | 'err'; d: string }
  | ExitFrame
  | ResetFrame
  | { t: 'manifest'; id: string | null; files: ManifestEntry[]; more: boolean; truncated?: boolean }
  | { t: 'chunk'; id: string | null; d: string }
  | BytesFrame
  | DoneFrame
  | ToolCallFrame;

/** Raw bytes of a request (a stateful session's saved variables): the frame's line announces `n`, the bytes follow. */
export interface BytesFrame {
  t: 'bytes';
  id: string | null;
  data: Buffer;
  /** Drop the bytes that came before for this request: the agent starts again (it left a variable out). */
  restart?: boolean;
}

/** Code in the sandbox calls a tool (sandgate.tools): the worker answers with a ToolResult of the same `call`. */
export interface ToolCallFrame {
  t: 'tool_call';
  id: string | null;
  call: number;
  name: string;
  args: unknown;
}

/** The answer to a tool_call. */
export type ToolResult = { op: 'tool_result'; call: number } & (
  { ok: true; result: unknown } | { ok: false; error: string }
);

/** A file of the agent's workspace: path, size in bytes, mtime in ms since the epoch. */
export type ManifestEntry = [path: string, size: number, mtimeMs: number];

/** The end of a file request (sandgate_files.py): `ok`, or why not. */
export interface DoneFrame {
  t: 'done';
  id: string | null;
  ok: boolean;
  error?: string;
  size?: number;
  mtime_ms?: number;
  /** save_state: how many variables were saved, and those that were not, with why. */
  saved?: number;
  unsaved?: [name: string, reason: string][];
  /** load_state: how many variables the interpreter has now. */
  restored?: number;
}

export interface ExitFrame {
  t: 'exit';
  id: string | null;
  /** The program's exit status; -1 when an interrupt killed it. */
  code: number;
  /** Stateful runs: repr() of the last expression's value. */
  value?: string;
  /** Stateful runs: the interpreter was fresh for this run. */
  restarted?: boolean;
  /** The sandbox's memory cgroup OOM-killed something during the run. */
  oom?: boolean;
  /** One-execution Pods: the runner killed the program at its time limit. */
  timedOut?: boolean;
  /** One-execution Pods: how long the program ran, as the runner measured it. */
  durationMs?: number;
}

/** The answer to a reset: `ok` only when nothing of the earlier runs is left in the sandbox. */
export interface ResetFrame {
  t: 'reset';
  id: string | null;
  ok: boolean;
  error?: string;
}

/** A run request; `id` comes back in the `started` and `exit` frames of that run only. */
export interface RunRequest {
  op: 'run';
  id: string;
  language: Language;
  code: string;
  /** Process mode: the program and its arguments (commandFor); the agent runs exactly this. */
  argv?: string[];
  env: Record<string, string>;
  stdin: string | null;
  mode: 'process' | 'stateful';
  /** Bytes of each stream the agent sends; it reads and drops the rest (one byte more, to flag truncation). */
  cap: number;
  /** The tenant has tools: the program gets a tool channel (sandgate_tools.py). */
  tools?: boolean;
  /** Start the program as this service of the session (sandgate_services.py): the run ends once it has started. */
  service?: string;
}

/** Stops the current run: kills its process group, or raises KeyboardInterrupt in the interpreter. */
export const INTERRUPT = { op: 'interrupt' } as const;

/** Answered at once with a `pong` of the same id: proves that this attach receives the agent's frames. */
export interface Ping {
  op: 'ping';
  id: string;
}

/**
 * Between two runs of a pool sandbox: kill every process but the agent, empty the writable scratch mounts, remove
 * System V IPC objects (images/runtime/agent/sandgate_reset.py). Answered with a `reset` frame of the same id.
 */
export interface Reset {
  op: 'reset';
  id: string;
}

/**
 * File requests, served by agents that own their workspace (Kubernetes session Pods; sandgate_files.py). `root`: the
 * mount path of a volume, for a session Pod's volumes container (sandgate_volumes.py); the agent has none.
 */
export type FileRequest =
  | { op: 'manifest'; id: string; root?: string }
  | { op: 'put'; id: string; path: string; d: string; last: boolean; mtime_ms?: number; root?: string }
  | { op: 'get'; id: string; path: string; max: number; root?: string }
  | { op: 'delete'; id: string; paths: string[]; root?: string };

/**
 * A stateful session's variables: `save_state` is answered with bytes frames (at most `max` bytes in all) then a done
 * frame; `load_state` lines, each followed by its `n` bytes, with a done frame after the last.
 */
export type StateRequest =
  { op: 'save_state'; id: string; max: number } | { op: 'load_state'; id: string; n: number; last: boolean };

export type AgentMessage = RunRequest | Ping | Reset | typeof INTERRUPT | FileRequest | ToolResult | StateRequest;

export const encodeMessage = (message: AgentMessage): string => `${JSON.stringify(message)}\n`;

/**
 * A frame from one line, or undefined for anything else. The agent's stdout carries nothing but frames, but a
 * sandbox is hostile ground all the same, so every field is checked.
 */
export function parseFrame(line: string): AgentFrame | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const f = value as Record<string, unknown>;
  const id = typeof f.id === 'string' ? f.id : null;
  switch (f.t) {
    case 'ready':
      return { t: 'ready' };
    case 'pong':
      return { t: 'pong', id };
    case 'started':
      return { t: 'started', id };
    case 'out':
    case 'err':
      return typeof f.d === 'string' ? { t: f.t, d: f.d } : undefined;
    case 'reset': {
      if (typeof f.ok !== 'boolean') return undefined;
      const reset: ResetFrame = { t: 'reset', id, ok: f.ok };
      if (typeof f.error === 'string') reset.error = f.error;
      return reset;
    }
    case 'exit': {
      if (typeof f.code !== 'number' || !Number.isInteger(f.code)) return undefined;
      const exit: ExitFrame = { t: 'exit', id, code: f.code };
      if (typeof f.value === 'string') exit.value = f.value;
      if (typeof f.restarted === 'boolean') exit.restarted = f.restarted;
      if (f.oom === true) exit.oom = true;
      if (f.timed_out === true) exit.timedOut = true;
      if (typeof f.duration_ms === 'number' && f.duration_ms >= 0) exit.durationMs = f.duration_ms;
      return exit;
    }
    case 'manifest': {
      if (!Array.isArray(f.files) || typeof f.more !== 'boolean') return undefined;
      const files = f.files.filter(
        (e): e is ManifestEntry =>
          Array.isArray(e) &&
          typeof e[0] === 'string' &&
          Number.isSafeInteger(e[1]) &&
          (e[1] as number) >= 0 &&
          Number.isSafeInteger(e[2]),
      );
      return { t: 'manifest', id, files, more: f.more, ...(f.truncated === true ? { truncated: true } : {}) };
    }
    case 'chunk':
      return typeof f.d === 'string' ? { t: 'chunk', id, d: f.d } : undefined;
    case 'tool_call':
      if (!Number.isSafeInteger(f.call) || typeof f.name !== 'string') return undefined;
      return { t: 'tool_call', id, call: f.call as number, name: f.name, args: f.args };
    case 'done': {
      if (typeof f.ok !== 'boolean') return undefined;
      const done: DoneFrame = { t: 'done', id, ok: f.ok };
      if (typeof f.error === 'string') done.error = f.error;
      if (Number.isSafeInteger(f.size)) done.size = f.size as number;
      if (Number.isSafeInteger(f.mtime_ms)) done.mtime_ms = f.mtime_ms as number;
      if (Number.isSafeInteger(f.saved)) done.saved = f.saved as number;
      if (Number.isSafeInteger(f.restored)) done.restored = f.restored as number;
      if (Array.isArray(f.unsaved)) {
        done.unsaved = f.unsaved
          .slice(0, MAX_NAMED)
          .filter(
            (e): e is [string, string] => Array.isArray(e) && typeof e[0] === 'string' && typeof e[1] === 'string',
          )
          .map(([name, reason]) => [name.slice(0, 256), reason.slice(0, 200)]);
      }
      return done;
    }
    default:
      return undefined;
  }
}

/** Variables a save names at most. */
const MAX_NAMED = 1000;
/** Bytes one bytes frame may announce. */
export const MAX_BYTES_FRAME = 16 << 20;

/** Longest line kept; the agent frames at most 64 KiB of output per line (~400 KB escaped). */
export const MAX_LINE_BYTES = 4 * 1024 * 1024;

/** Splits the agent's stdout into lines and hands each frame on; an overlong line is dropped whole. */
export class FrameDecoder {
  readonly #onFrame: (frame: AgentFrame) => void;
  readonly #maxLineBytes: number;
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #discarding = false;

  constructor(onFrame: (frame: AgentFrame) => void, maxLineBytes: number = MAX_LINE_BYTES) {
    this.#onFrame = onFrame;
    this.#maxLineBytes = maxLineBytes;
  }

  /** The bytes frame being received: its line, and the bytes still to come. */
  #bytes: { id: string | null; restart: boolean; parts: Buffer[]; left: number } | undefined;

  push(chunk: Buffer): void {
    let start = 0;
    if (this.#bytes !== undefined) start = this.#takeBytes(chunk, 0);
    for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      const line = this.#pending.length === 0 ? piece : Buffer.concat([...this.#pending, piece]);
      const drop = this.#discarding || line.length > this.#maxLineBytes;
      this.#pending = [];
      this.#pendingBytes = 0;
      this.#discarding = false;
      if (drop) continue;
      // Frames are ASCII JSON: latin1 decoding is exact and the cheapest.
      const text = line.toString('latin1');
      if (text.startsWith('{"t":"bytes"')) {
        start = this.#beginBytes(text, chunk, start);
        continue;
      }
      const frame = parseFrame(text);
      if (frame !== undefined) this.#onFrame(frame);
    }
    if (start >= chunk.length || this.#discarding || this.#bytes !== undefined) return;
    const rest = chunk.subarray(start);
    this.#pendingBytes += rest.length;
    if (this.#pendingBytes > this.#maxLineBytes) {
      this.#discarding = true;
      this.#pending = [];
      this.#pendingBytes = 0;
    } else {
      // Copied, so a short remainder does not keep a whole 64 KiB chunk alive.
      this.#pending.push(Buffer.from(rest));
    }
  }

  /** A bytes frame's line: its bytes follow, from `start` in `chunk` (and in chunks to come). */
  #beginBytes(line: string, chunk: Buffer, start: number): number {
    let head: { id?: unknown; n?: unknown; restart?: unknown };
    try {
      head = JSON.parse(line) as typeof head;
    } catch {
      return start;
    }
    const n = head.n;
    // A size it cannot have ends the stream's sense: what follows is dropped as lines would be.
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0 || n > MAX_BYTES_FRAME) return start;
    this.#bytes = {
      id: typeof head.id === 'string' ? head.id : null,
      restart: head.restart === true,
      parts: [],
      left: n,
    };
    return this.#takeBytes(chunk, start);
  }

  /** Takes what `chunk` holds of the bytes frame being received, from `start`; answers where the rest begins. */
  #takeBytes(chunk: Buffer, start: number): number {
    const b = this.#bytes!;
    const take = Math.min(b.left, chunk.length - start);
    if (take > 0) b.parts.push(Buffer.from(chunk.subarray(start, start + take)));
    b.left -= take;
    if (b.left === 0) {
      this.#bytes = undefined;
      const frame: BytesFrame = { t: 'bytes', id: b.id, data: Buffer.concat(b.parts) };
      if (b.restart) frame.restart = true;
      this.#onFrame(frame);
    }
    return start + take;
  }
}
