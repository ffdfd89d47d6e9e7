import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { NoSandbox, ServiceAgents, TooManyWatches } from '@sandgate/backends/services';
import type { FileChange } from '@sandgate/contracts';
import { FileEventLog, type FileEventEntry } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';

/** How long a feeder's lease lasts unrenewed: another gateway takes over this long after one dies. */
const LEASE_MS = 10_000;
const RENEW_MS = 3_000;
/** How often a feeder looks for the sandbox (a run or a resume makes it), or a gateway without the lease for it. */
const RETRY_MS = 1_000;
/**
 * The longest line taken from the agent: `max_events` events of a path each (paths are at most 4 KiB), but never more
 * than MAX_LINE_BYTES held per session; a longer line is an overflow (the watch is then opened afresh).
 */
const MAX_LINE_BYTES = 16 << 20;
const lineBound = (maxEvents: number) => Math.min(MAX_LINE_BYTES, 1024 + maxEvents * 4400);

/** A change the API made to a session's files (an upload, a delete). */
export interface FileChangeNote {
  type: FileChange;
  path: string;
  size: number;
  mtimeMs: number;
}

/** Lua: renews the lease if this process holds it, takes it if nobody does. */
const TAKE_LEASE = `
  local v = redis.call('GET', KEYS[1])
  if v == ARGV[1] or not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
  return 0`;
const DROP_LEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end return 0`;

export const listUrlOf = (sessionId: string) => `/v1/sessions/${sessionId}/files`;

/**
 * File events of sessions (docs/file-events.md): the API's changes and the sandbox's, in one Redis stream per session
 * (FileEventLog). The sandbox's come from its agent's watch (sandgate_watch.py), which one gateway process per session
 * feeds into the stream while any gateway has a client listening: it holds a lease in Redis, renews it while its own
 * clients listen, and lets go when they have all gone. A process without the lease tries again every second, so one
 * takes over when the holder stops or dies.
 */
export class FileEvents {
  readonly log: FileEventLog;
  readonly #d: GatewayDeps;
  readonly #agents: ServiceAgents;
  readonly #me = `gw_${randomBytes(8).toString('hex')}`;
  /** Sessions this process has clients for: how many, and the feeder it runs for them. */
  readonly #listened = new Map<string, { clients: number; stop: AbortController; done: Promise<void> }>();

  constructor(d: GatewayDeps) {
    this.#d = d;
    this.#agents = new ServiceAgents(d.config.dataDir);
    const { fileEventsKeep: keep, fileEventsTtlSeconds: ttlSeconds, fileEventsIntervalMs } = d.config;
    this.log = new FileEventLog(d.redis, d.keys, {
      keep,
      ttlSeconds,
      dedupMs: Math.max(5_000, 4 * fileEventsIntervalMs),
    });
  }

  /** Adds what the API changed in a session's files. */
  async announce(sessionId: string, changes: readonly FileChangeNote[]): Promise<void> {
    await this.log.append(sessionId, changes.map(entryOf));
  }

  /** Keeps the sandbox's events of the session coming while `signal` is not aborted (a client listens). */
  listen(sessionId: string, signal: AbortSignal): void {
    let entry = this.#listened.get(sessionId);
    if (entry === undefined) {
      const stop = new AbortController();
      entry = { clients: 0, stop, done: this.#feed(sessionId, stop.signal) };
      this.#listened.set(sessionId, entry);
    }
    entry.clients += 1;
    const current = entry;
    const leave = (): void => {
      current.clients -= 1;
      if (current.clients > 0) return;
      current.stop.abort();
      if (this.#listened.get(sessionId) === current) this.#listened.delete(sessionId);
    };
    if (signal.aborted) leave();
    else signal.addEventListener('abort', leave, { once: true });
  }

  async close(): Promise<void> {
    const all = [...this.#listened.values()];
    for (const e of all) e.stop.abort();
    await Promise.all(all.map((e) => e.done));
  }

  /** Feeds the sandbox's events into the stream while this process holds the lease, until `stop`. */
  async #feed(sessionId: string, stop: AbortSignal): Promise<void> {
    const { redis, keys, log } = this.#d;
    const lease = keys.fileWatchLease(sessionId);
    const take = () => redis.eval(TAKE_LEASE, 1, lease, this.#me, LEASE_MS).then((r) => r === 1);
    try {
      while (!stop.aborted) {
        if (!(await take().catch(() => false))) {
          await pause(RETRY_MS, stop);
          continue;
        }
        const agent = await this.#connect(sessionId);
        if (agent === null) {
          await pause(RETRY_MS, stop);
          continue;
        }
        await this.#relay(sessionId, agent, stop, take).catch((err: unknown) => {
          log.warn({ err, session_id: sessionId }, 'file events of the sandbox stopped; reconnecting');
        });
      }
    } finally {
      await redis.eval(DROP_LEASE, 1, lease, this.#me).catch(() => undefined);
    }
  }

  async #connect(sessionId: string): Promise<Socket | null> {
    const { fileEventsIntervalMs: intervalMs, fileEventsMaxPerInterval: maxEvents } = this.#d.config;
    try {
      return await this.#agents.watch(sessionId, {
        intervalMs,
        maxEvents,
        maxWatches: this.#d.config.fileEventsMaxWatches,
      });
    } catch (err) {
      if (!(err instanceof NoSandbox) && !(err instanceof TooManyWatches)) {
        this.#d.log.warn({ err, session_id: sessionId }, 'cannot watch the files of the sandbox');
      }
      return null;
    }
  }

  /** Appends the agent's lines to the stream until the agent closes, `stop`, or the lease is lost. */
  async #relay(sessionId: string, agent: Socket, stop: AbortSignal, take: () => Promise<boolean>): Promise<void> {
    const bound = lineBound(this.#d.config.fileEventsMaxPerInterval);
    const end = (): void => void agent.destroy();
    stop.addEventListener('abort', end, { once: true });
    const renew = setInterval(() => {
      take()
        .then((held) => held || end())
        .catch(end);
    }, RENEW_MS);
    let buffered = '';
    try {
      agent.setEncoding('utf8');
      agent.resume();
      for await (const chunk of agent as AsyncIterable<string>) {
        buffered += chunk;
        if (buffered.length > bound) {
          await this.log.append(sessionId, [
            overflowEntry(sessionId, `the sandbox reported over ${bound} bytes at once`),
          ]);
          throw new Error('the sandbox agent sent a line over its bound');
        }
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          await this.log.append(sessionId, entriesOf(sessionId, line));
        }
      }
    } finally {
      clearInterval(renew);
      stop.removeEventListener('abort', end);
      agent.destroy();
    }
  }
}

interface AgentLine {
  events?: { type: string; path: string; size: number; mtime_ms: number }[];
  overflow?: string | null;
}

const CHANGES = new Set<string>(['created', 'modified', 'deleted']);

/** What one line of the agent adds to the stream; anything malformed is dropped (the sandbox is not trusted). */
export function entriesOf(sessionId: string, line: string): FileEventEntry[] {
  let parsed: AgentLine;
  try {
    parsed = JSON.parse(line) as AgentLine;
  } catch {
    return [];
  }
  const out: FileEventEntry[] = [];
  for (const e of Array.isArray(parsed.events) ? parsed.events : []) {
    if (typeof e !== 'object' || e === null || !CHANGES.has(e.type) || !validPath(e.path)) continue;
    if (!Number.isSafeInteger(e.size) || e.size < 0 || !Number.isSafeInteger(e.mtime_ms) || e.mtime_ms < 0) continue;
    if (e.mtime_ms > 8.64e15) continue;
    out.push(entryOf({ type: e.type as FileChange, path: e.path, size: e.size, mtimeMs: e.mtime_ms }));
  }
  if (typeof parsed.overflow === 'string') {
    out.push(overflowEntry(sessionId, parsed.overflow.slice(0, 200)));
  }
  return out;
}

/** A relative path as the files API takes them: no empty, `.` or `..` segment, no control character. */
const validPath = (p: unknown): p is string =>
  typeof p === 'string' &&
  p.length > 0 &&
  p.length <= 4096 &&
  !p.startsWith('/') &&
  // eslint-disable-next-line no-control-regex
  !/[\u0000-\u001f]/.test(p) &&
  p.split('/').every((s) => s !== '' && s !== '.' && s !== '..');

function entryOf(c: FileChangeNote): FileEventEntry {
  const mtimeMs = Math.floor(c.mtimeMs);
  const deleted = c.type === 'deleted';
  const size = deleted ? 0 : c.size;
  const data = JSON.stringify({ path: c.path, size_bytes: size, modified_at: new Date(mtimeMs).toISOString() });
  return { type: c.type, data, path: c.path, state: deleted ? '' : `${size}:${mtimeMs}` };
}

function overflowEntry(sessionId: string, reason: string): FileEventEntry {
  const data = JSON.stringify({
    code: 'file_events_overflow',
    detail: `${reason}: the changes of that moment are not reported one by one; list the files instead`,
    list_url: listUrlOf(sessionId),
  });
  return { type: 'overflow', data, path: '', state: '' };
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
