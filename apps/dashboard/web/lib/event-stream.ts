import { EventSourceParserStream } from 'eventsource-parser/stream';
import { ApiError } from './api.ts';

export interface StreamEvent {
  id: string;
  event: string;
  data: string;
}
export type ConnectionState = 'connecting' | 'open' | 'reconnecting' | 'ended';

/** Orders the ids of one execution's stream (`<ms>-<seq>`, as Redis Streams makes them). */
export function compareEventIds(a: string, b: string): number {
  const [am = 0, as = 0] = a.split('-').map(Number);
  const [bm = 0, bs = 0] = b.split('-').map(Number);
  return am - bm || as - bs;
}

export interface FollowOptions {
  /** Request headers (the API key); called on every (re)connection. */
  headers(): Record<string, string>;
  /** Resume after this id (what was already shown), or null for the whole stream. */
  after: string | null;
  signal: AbortSignal;
  onEvent(ev: StreamEvent): void;
  onState?(state: ConnectionState, reconnects: number): void;
  /** The event after which the server ends the stream for good. */
  lastEvent?: string;
}

const RETRY_MS = [250, 500, 1000, 2000, 4000];
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });

/**
 * Follows an SSE endpoint with fetch, so the API key travels in a header (a browser EventSource cannot
 * send one). When the connection drops it reconnects with `Last-Event-ID` set to the last id it
 * delivered, and it drops any event at or before that id, so output is neither lost nor repeated.
 * Resolves after `lastEvent`, rejects on an answer that a retry cannot fix (401, 403, 404).
 */
export async function followEvents(url: string, opts: FollowOptions): Promise<void> {
  const { signal, lastEvent = 'result' } = opts;
  let last = opts.after;
  for (let failures = 0, reconnects = 0; !signal.aborted; reconnects++) {
    opts.onState?.(reconnects === 0 ? 'connecting' : 'reconnecting', reconnects);
    try {
      const headers = { accept: 'text/event-stream', ...opts.headers(), ...(last ? { 'last-event-id': last } : {}) };
      const res = await fetch(url, { headers, signal, cache: 'no-store' });
      // 204: the run has ended and nothing is left after Last-Event-ID.
      if (res.status === 204) {
        opts.onState?.('ended', reconnects);
        return;
      }
      if (!res.ok || !res.body) {
        const body = (await res.json().catch(() => null)) as { code?: string; detail?: string } | null;
        const err = new ApiError(
          res.status,
          body?.code ?? `http_${res.status}`,
          body?.detail ?? 'the event stream failed',
        );
        if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) throw err;
        throw Object.assign(err, { retry: true });
      }
      opts.onState?.('open', reconnects);
      const events = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
      for await (const ev of streamIterator(events)) {
        failures = 0;
        if (!ev.id) continue; // server-side errors are retried, not shown
        if (last && compareEventIds(ev.id, last) <= 0) continue; // already delivered before the drop
        last = ev.id;
        opts.onEvent({ id: ev.id, event: ev.event ?? 'message', data: ev.data });
        if (ev.event === lastEvent) {
          opts.onState?.('ended', reconnects);
          return;
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof ApiError && !(err as ApiError & { retry?: boolean }).retry) throw err;
    }
    await sleep(RETRY_MS[Math.min(failures++, RETRY_MS.length - 1)]!, signal);
  }
}

async function* streamIterator<T>(stream: ReadableStream<T>): AsyncGenerator<T> {
  const reader = stream.getReader();
  let done = false;
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done) {
        done = true;
        return;
      }
      yield next.value;
    }
  } finally {
    // Leaving early (the last event, an abort): close the connection instead of leaving it to the server.
    if (!done) await reader.cancel().catch(() => {});
  }
}
