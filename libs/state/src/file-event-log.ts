import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/** One change to add to a session's file events: `state` tells two reports of one change apart from two changes. */
export interface FileEventEntry {
  /** created, modified, deleted or overflow. */
  type: string;
  /** The SSE data, JSON. */
  data: string;
  /** The file's path ('' for an overflow). */
  path: string;
  /** For a file: its size and modification time in ms, `<size>:<mtime>`; '' once deleted. */
  state: string;
}

/**
 * Lua: appends file events to a session's stream, skipping one that only repeats what the stream says already — the
 * same path in the same state (size and mtime, or deleted) reported within `dedupMs` (an upload is seen by the API and,
 * moments later, by the sandbox's watch), and an overflow right after an overflow. Trims the stream to `keep`
 * entries and lets it expire `ttl` seconds after its last event. ARGV: dedupMs, keep, ttl, lookback, then type, data,
 * path, state for each event. Answers how many were added.
 */
const APPEND_FILE_EVENTS = `
  local key = KEYS[1]
  local dedupMs, keep, ttl, lookback = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
  local now = redis.call('TIME')
  local since = (tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)) - dedupMs
  local recent = redis.call('XREVRANGE', key, '+', string.format('%d', since), 'COUNT', lookback)
  local last = {}
  local lastType = nil
  local function fields(entry)
    local f = {}
    for i = 1, #entry[2], 2 do f[entry[2][i]] = entry[2][i + 1] end
    return f
  end
  for i = #recent, 1, -1 do
    local f = fields(recent[i])
    if f.path ~= nil and f.path ~= '' then last[f.path] = f.state end
  end
  if #recent > 0 then lastType = fields(recent[1]).type end
  local added = 0
  for i = 5, #ARGV, 4 do
    local t, data, path, state = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    local repeated
    if t == 'overflow' then repeated = lastType == 'overflow' else repeated = last[path] == state end
    if not repeated then
      redis.call('XADD', key, 'MAXLEN', keep, '*', 'type', t, 'data', data, 'path', path, 'state', state)
      if t ~= 'overflow' then last[path] = state end
      lastType = t
      added = added + 1
    end
  end
  if added > 0 then redis.call('EXPIRE', key, ttl) end
  return added
`;

export interface FileEventLogOptions {
  /** Events kept per session for Last-Event-ID . */
  keep: number;
  /** Seconds a session's events are kept after its last one. */
  ttlSeconds: number;
  /** Within this, a second report of a file in the same state is the same change. */
  dedupMs: number;
}

/** Entries looked back at for repeats: enough for any one interval's burst below the overflow bound to matter. */
const LOOKBACK = 1000;

type Scripted = Redis & { appendFileEvents(key: string, ...args: (string | number)[]): Promise<number> };

/** The file events of sessions, one Redis stream each (docs/file-events.md): what the SSE route replays and follows. */
export class FileEventLog {
  readonly #redis: Scripted;
  readonly #keys: Keys;
  readonly #o: FileEventLogOptions;

  constructor(redis: Redis, keys: Keys, options: FileEventLogOptions) {
    if (!('appendFileEvents' in redis)) {
      redis.defineCommand('appendFileEvents', { numberOfKeys: 1, lua: APPEND_FILE_EVENTS });
    }
    this.#redis = redis as Scripted;
    this.#keys = keys;
    this.#o = options;
  }

  key(sessionId: string): string {
    return this.#keys.fileEvents(sessionId);
  }

  /** Appends what is not a repeat; answers how many were added. */
  async append(sessionId: string, events: readonly FileEventEntry[]): Promise<number> {
    if (events.length === 0) return 0;
    const args: string[] = [];
    for (const e of events) args.push(e.type, e.data, e.path, e.state);
    const { dedupMs, keep, ttlSeconds } = this.#o;
    return this.#redis.appendFileEvents(this.key(sessionId), dedupMs, keep, ttlSeconds, LOOKBACK, ...args);
  }

  /** The id of the newest event, the oldest kept, or null when the session has none. */
  async bounds(sessionId: string): Promise<{ first: string; last: string } | null> {
    const [first] = (await this.#redis.xrange(this.key(sessionId), '-', '+', 'COUNT', 1)) as [string, string[]][];
    const [last] = (await this.#redis.xrevrange(this.key(sessionId), '+', '-', 'COUNT', 1)) as [string, string[]][];
    return first && last ? { first: first[0], last: last[0] } : null;
  }
}
