import { EventSourceParserStream } from 'eventsource-parser/stream';

export interface SseEvent {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

/**
 * Reads an SSE response with eventsource-parser. `onEvent` returning false disconnects (as a
 * browser tab closing would); otherwise reading goes on until the server ends the stream.
 */
export async function readSse(
  url: string,
  opts: {
    headers?: Record<string, string>;
    onEvent?: (ev: SseEvent) => boolean | void;
  } = {},
): Promise<{ status: number; events: SseEvent[]; contentType: string | null }> {
  const ac = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...opts.headers }, signal: ac.signal });
  const events: SseEvent[] = [];
  if (!res.ok || !res.body) return { status: res.status, events, contentType: res.headers.get('content-type') };
  const reader = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const ev = { id: value.id, event: value.event, data: value.data };
      events.push(ev);
      if (opts.onEvent?.(ev) === false) {
        ac.abort();
        break;
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  }
  return { status: res.status, events, contentType: res.headers.get('content-type') };
}
