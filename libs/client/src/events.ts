import { EventSourceParserStream } from 'eventsource-parser/stream';
import type { ExecutionStreamEvent } from './generated/types.gen.js';
import { SandgateApiError, errorOf } from './errors.js';

export interface TailOptions {
  /** Resume after this event id (an earlier event's `id`); default: from the first event. */
  lastEventId?: string;
  /** Stops tailing (the generator then returns). */
  signal?: AbortSignal;
  /** Reconnections in a row that may fail before tailing gives up; default 10. */
  maxRetries?: number;
  /** Wait before reconnecting, unless the server sent `retry:`; default 1000 ms. */
  retryMs?: number;
}

type Connect = (headers: Record<string, string>, signal: AbortSignal) => Promise<Response>;

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });

/**
 * The events of one execution (or of any stream of sandgate's: a session's file events), in order, each once, until
 * its `result` (a stream without one goes on until `signal` aborts): when the connection drops, it reconnects with
 * `Last-Event-ID` and goes on from the last event it handed out. A 204 (the run ended and nothing is left) ends it.
 * An `error` event or an error answer throws.
 */
export async function* tailEvents<E extends { event: string } = ExecutionStreamEvent>(
  connect: Connect,
  opts: TailOptions = {},
): AsyncGenerator<E> {
  const { signal, maxRetries = 10 } = opts;
  let lastId = opts.lastEventId;
  let retryMs = opts.retryMs ?? 1000;
  let failures = 0;
  while (!signal?.aborted) {
    const ac = new AbortController();
    const stop = () => ac.abort();
    signal?.addEventListener('abort', stop, { once: true });
    try {
      const response = await connect(
        { accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
        ac.signal,
      );
      if (response.status === 204) return;
      if (!response.ok || !response.body) throw await errorOf(response);
      const reader = response.body
        .pipeThrough(new TextDecoderStream())
        .pipeThrough(
          new EventSourceParserStream({
            onRetry: (ms) => {
              retryMs = ms;
            },
          }),
        )
        .getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        failures = 0;
        const event = { event: value.event, data: JSON.parse(value.data), ...(value.id ? { id: value.id } : {}) };
        if (value.id) lastId = value.id;
        yield event as unknown as E;
        if (event.event === 'error') throw new SandgateApiError(event.data.status ?? 500, event.data);
        if (event.event === 'result') return;
      }
    } catch (err) {
      if (signal?.aborted) return;
      // An answer of the API (404, 401, …) is final; a dropped connection is retried.
      if (err instanceof SandgateApiError || ++failures > maxRetries) throw err;
    } finally {
      signal?.removeEventListener('abort', stop);
      ac.abort();
    }
    await sleep(retryMs, signal);
  }
}
