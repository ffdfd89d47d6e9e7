import { EventSourceParserStream } from 'eventsource-parser/stream';
import type { SessionMetrics } from './generated/types.gen.js';
import { SandgateApiError, errorOf } from './errors.js';

export interface WatchMetricsOptions {
  /** Stops watching (the generator then returns). */
  signal?: AbortSignal;
}

type Connect = (headers: Record<string, string>, signal: AbortSignal) => Promise<Response>;

/**
 * A session's figures about once a second (GET /v1/sessions/{id}/metrics/stream), until the session is deleted (the
 * generator then returns) or `signal` aborts. An error answer (404, 429 too_many_metric_streams) or `error` event
 * throws. Live figures are not replayed: after a dropped connection, watch again.
 */
export async function* watchMetrics(
  connect: Connect,
  { signal }: WatchMetricsOptions = {},
): AsyncGenerator<SessionMetrics> {
  const ac = new AbortController();
  const stop = () => ac.abort();
  signal?.addEventListener('abort', stop, { once: true });
  try {
    const response = await connect({ accept: 'text/event-stream' }, ac.signal);
    if (!response.ok || !response.body) throw await errorOf(response);
    const reader = response.body
      .pipeThrough(new TextDecoderStream())
      .pipeThrough(new EventSourceParserStream())
      .getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done || value.event === 'end') return;
      const data = JSON.parse(value.data) as SessionMetrics & { status?: number };
      if (value.event === 'error') throw new SandgateApiError(data.status ?? 500, data as never);
      if (value.event === 'metrics') yield data as SessionMetrics;
    }
  } catch (err) {
    if (!signal?.aborted) throw err;
  } finally {
    signal?.removeEventListener('abort', stop);
    ac.abort();
  }
}
