import type { Redis } from 'ioredis';
import type { EventType } from '@sandgate/contracts';
import { compareStreamIds } from './stream-ids.ts';

/** One event as stored in an execution's stream; `data` is JSON text, sent to SSE clients as is. */
export interface StoredEvent {
  id: string;
  type: EventType;
  data: string;
  /**
   * On a `result` entry: `started_at` (empty if the run never started) and `finished_at` as stored, in ms. Not part
   * of the SSE event; see endingOf.
   */
  times?: { startedAt: string; finishedAt: string };
}

type Entry = { cursor: string; subs: Set<(ev: StoredEvent) => void> };
type Logger = { warn(obj: object, msg: string): void };

export function toStoredEvent([id, fields]: [string, string[]]): StoredEvent {
  const f: Record<string, string> = {};
  for (let i = 0; i < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
  const ev: StoredEvent = { id, type: (f.type ?? '') as EventType, data: f.data ?? '' };
  if (f.finished_at) ev.times = { startedAt: f.started_at ?? '', finishedAt: f.finished_at };
  return ev;
}

/**
 * Fans the event streams of many executions out to many subscribers over ONE blocking Redis
 * connection per process: a single multi-key XREAD, restarted (CLIENT UNBLOCK) when the set of
 * watched streams changes. Subscribers replay what they missed with XRANGE, then follow live.
 */
/** The entries of a stream in (after, until], read in pages of 1,000 on `redis` (no subscription). */
export async function* readStream(
  redis: Pick<Redis, 'xrange'>,
  key: string,
  after = '0-0',
  until = '+',
): AsyncGenerator<StoredEvent> {
  for (let from = after; ;) {
    const page = (await redis.xrange(key, `(${from}`, until, 'COUNT', 1000)) as [string, string[]][];
    for (const raw of page) yield toStoredEvent(raw);
    if (page.length < 1000) return;
    from = page[page.length - 1]![0];
  }
}

export class EventHub {
  readonly #streams = new Map<string, Entry>();
  #readerId: number | null = null;
  #blocked = false;
  #idle: (() => void) | null = null;
  #closed = false;
  readonly #loopDone: Promise<void>;

  readonly #reader: Redis;
  readonly #control: Redis;
  readonly #log: Logger;
  constructor(reader: Redis, control: Redis, log: Logger) {
    this.#reader = reader;
    this.#control = control;
    this.#log = log;
    // The reader's id is what CLIENT UNBLOCK names: learnt whenever it (re)connects, including before this hub was
    // made (a connection that was ready already emits no 'ready'), and before the first blocking read, which would
    // otherwise hold the CLIENT ID behind it and leave a new subscriber waiting for the read's timeout.
    reader.on('ready', () => void this.#learnId());
    if (reader.status === 'ready') void this.#learnId();
    this.#loopDone = this.#loop();
  }

  /**
   * Events of the stream at `key` after `after` (exclusive; null = from the start), in order, each
   * exactly once, ending after the `result` event or when `signal` aborts.
   */
  async *subscribe(key: string, after: string | null, signal: AbortSignal): AsyncGenerator<StoredEvent> {
    const queue: StoredEvent[] = [];
    let wake: (() => void) | null = null;
    const push = (ev: StoredEvent) => {
      queue.push(ev);
      wake?.();
    };
    let last = after ?? '0-0';
    let entry = this.#streams.get(key);
    // What the hub already handed out is ≤ entry.cursor; this subscriber reads (last, cursor] itself.
    const replayTo = entry ? entry.cursor : null;
    if (!entry) {
      entry = { cursor: last, subs: new Set() };
      this.#streams.set(key, entry);
      this.#kick();
    }
    entry.subs.add(push);
    const onAbort = () => wake?.();
    signal.addEventListener('abort', onAbort);
    try {
      if (replayTo && compareStreamIds(replayTo, last) > 0) {
        for await (const ev of this.#range(key, last, replayTo)) {
          last = ev.id;
          yield ev;
          if (ev.type === 'result') return;
        }
      }
      while (!signal.aborted && !this.#closed) {
        const ev = queue.shift();
        if (!ev) {
          await new Promise<void>((r) => {
            wake = r;
          });
          wake = null;
          continue;
        }
        if (compareStreamIds(ev.id, last) <= 0) continue;
        last = ev.id;
        yield ev;
        if (ev.type === 'result') return;
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      entry.subs.delete(push);
      if (entry.subs.size === 0 && this.#streams.get(key) === entry) {
        this.#streams.delete(key);
        this.#kick();
      }
    }
  }

  /** Every event of a stream so far, read in pages (no subscription). */
  history(key: string): AsyncGenerator<StoredEvent> {
    return this.#range(key, '0-0', '+');
  }

  /** Entries in (after, until], paged. */
  #range(key: string, after: string, until: string): AsyncGenerator<StoredEvent> {
    return readStream(this.#control, key, after, until);
  }

  #learnId(): Promise<void> {
    return this.#reader
      .client('ID')
      .then((id) => {
        this.#readerId = Number(id);
      })
      .catch(() => {});
  }

  /** Makes the reader loop notice a changed set of streams. */
  #kick(): void {
    if (this.#idle) {
      this.#idle();
      this.#idle = null;
      return;
    }
    if (this.#blocked && this.#readerId !== null) {
      this.#control
        .client('UNBLOCK', this.#readerId)
        .catch((err: unknown) => this.#log.warn({ err }, 'CLIENT UNBLOCK failed'));
    }
  }

  async #loop(): Promise<void> {
    while (!this.#closed) {
      if (this.#streams.size === 0) {
        await new Promise<void>((r) => {
          this.#idle = r;
        });
        continue;
      }
      if (this.#readerId === null) await this.#learnId();
      const keys = [...this.#streams.keys()];
      const ids = keys.map((k) => this.#streams.get(k)!.cursor);
      let res: [string, [string, string[]][]][] | null;
      this.#blocked = true;
      try {
        res = (await this.#reader.xread('COUNT', 1000, 'BLOCK', 10_000, 'STREAMS', ...keys, ...ids)) as typeof res;
      } catch (err) {
        if (this.#closed) return;
        this.#log.warn({ err }, 'event stream read failed; retrying');
        await new Promise((r) => setTimeout(r, 250));
        continue;
      } finally {
        this.#blocked = false;
      }
      for (const [key, entries] of res ?? []) {
        const entry = this.#streams.get(key);
        if (!entry) continue;
        for (const raw of entries) {
          const ev = toStoredEvent(raw);
          entry.cursor = ev.id;
          for (const push of entry.subs) push(ev);
          // Nothing follows a result: stop reading the stream now rather than unblock the read when its
          // subscribers leave. A later subscriber starts it afresh and finds the result straight away.
          if (ev.type === 'result') this.#streams.delete(key);
        }
      }
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#kick();
    this.#idle?.();
    this.#reader.disconnect();
    await this.#loopDone.catch(() => {});
  }
}
