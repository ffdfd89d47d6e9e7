import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { SandgateError } from '@sandgate/contracts';
import { isStreamId, type StoredEvent } from '@sandgate/state';
import type { GatewayDeps } from './deps.ts';
import { toProblem } from './plugins/errors.ts';

/** How soon a client reconnects when this gateway ends its stream to shut down. */
const RECONNECT_MS = 250;

/**
 * Each live event's frame, made once for all its subscribers: the EventHub hands every subscriber of a stream the same
 * event object, and the frame depends only on the event and its stream (see serveEventStream's `present`). Events
 * replayed from Redis are objects of their own and are framed for their one subscriber.
 */
const frames = new WeakMap<StoredEvent, string>();

/** Where a client resumes a stream: its Last-Event-ID header, or ?last_event_id=; null: from the start. */
export function resumeAfter(req: FastifyRequest, query: { last_event_id?: string | undefined }): string | null {
  const header = req.headers['last-event-id'];
  const after = (Array.isArray(header) ? header[0] : header) ?? query.last_event_id ?? null;
  if (after !== null && !isStreamId(after))
    throw new SandgateError('bad_request', 'Last-Event-ID must be an id of this stream (<ms>-<seq>)');
  return after;
}

/**
 * Serves a Redis stream of events (an execution's, a template build's) as SSE from `after`, until its `result` event:
 * replayed, then followed through the EventHub. A stream that has ended with nothing left after `after` answers 204,
 * which tells an EventSource to stop reconnecting. `present` turns an event's stored data into what the client gets;
 * it must give the same for every subscriber of the stream, since a live event is presented and framed once for all.
 */
export async function serveEventStream(
  deps: GatewayDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  o: {
    key: string;
    after: string | null;
    ended: boolean;
    heartbeatMs: number;
    present?: (type: string, data: string) => string;
  },
): Promise<FastifyReply | undefined> {
  if (o.ended && (await deps.redis.xrange(o.key, o.after ? `(${o.after}` : '-', '+', 'COUNT', 1)).length === 0) {
    return reply.status(204).send(null);
  }
  reply.hijack();
  // Headers set through Fastify (CORS, rate limits) are not sent on a hijacked reply unless copied onto it.
  const headers = { ...reply.getHeaders(), 'x-request-id': String(req.id) } as OutgoingHttpHeaders;
  const sse = new SseWriter(reply.raw, headers, { heartbeatMs: o.heartbeatMs, retryMs: 2000 });
  deps.metrics.sseOpened();
  try {
    const stop = AbortSignal.any([sse.closed, deps.draining]);
    for await (const ev of deps.hub.subscribe(o.key, o.after, stop)) {
      let frame = frames.get(ev);
      if (frame === undefined) {
        frame = SseWriter.frame({ id: ev.id, event: ev.type, data: o.present ? o.present(ev.type, ev.data) : ev.data });
        frames.set(ev, frame);
      }
      // The stream's last event goes out with the end of the response, in one write.
      if (ev.type === 'result') {
        sse.end(frame);
        return undefined;
      }
      await sse.sendFrame(frame);
    }
    // A stream that ends without its `result` is to be resumed: say so, and soon, since another replica serves it.
    if (deps.draining.aborted) {
      await sse.reconnect(RECONNECT_MS, 'this gateway is shutting down; reconnect with Last-Event-ID');
    }
  } catch (err) {
    req.log.error({ err }, 'event stream failed');
    await sse.send({ event: 'error', data: JSON.stringify(toProblem(err, req)) });
  } finally {
    deps.metrics.sseClosed();
    sse.end();
  }
  return undefined;
}

/**
 * A Server-Sent Events writer on a raw response: owns ids and backpressure, heartbeats with
 * comments, and resolves pending writes when the client goes away (so nothing hangs on a dead socket).
 */
export class SseWriter {
  readonly closed: AbortSignal;
  readonly #ac = new AbortController();
  readonly #heartbeat: NodeJS.Timeout;

  readonly #res: ServerResponse;
  constructor(res: ServerResponse, headers: OutgoingHttpHeaders, opts: { heartbeatMs: number; retryMs: number }) {
    this.#res = res;
    this.closed = this.#ac.signal;
    res.on('close', () => this.#ac.abort());
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...headers,
    });
    res.write(`retry: ${opts.retryMs}\n\n`);
    this.#heartbeat = setInterval(() => void this.#write(': heartbeat\n\n'), opts.heartbeatMs);
  }

  /** Sends one event; `id` and `event` must not contain newlines, `data` is sent line by line. */
  send(ev: { id?: string; event: string; data: string }): Promise<void> {
    return this.#write(SseWriter.frame(ev));
  }

  /** Sends an event already framed by SseWriter.frame. */
  sendFrame(frame: string): Promise<void> {
    return this.#write(frame);
  }

  /** An event as the bytes of the stream; `id` and `event` must not contain newlines, `data` goes line by line. */
  static frame(ev: { id?: string; event: string; data: string }): string {
    if (/[\r\n]/.test(ev.event) || (ev.id && /[\r\n]/.test(ev.id)))
      throw new Error('SSE id/event must not contain newlines');
    const data = /[\r\n]/.test(ev.data)
      ? ev.data
          .split(/\r\n|\r|\n/)
          .map((l) => `data: ${l}\n`)
          .join('')
      : `data: ${ev.data}\n`;
    return `${ev.id ? `id: ${ev.id}\n` : ''}event: ${ev.event}\n${data}\n`;
  }

  #write(chunk: string): Promise<void> {
    if (this.closed.aborted) return Promise.resolve();
    if (this.#res.write(chunk)) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        this.#res.off('drain', done);
        this.#res.off('close', done);
        resolve();
      };
      this.#res.once('drain', done);
      this.#res.once('close', done);
    });
  }

  /** Tells the client to reconnect (with Last-Event-ID) after `retryMs`, e.g. to another replica; then end(). */
  async reconnect(retryMs: number, why: string): Promise<void> {
    await this.#write(`: ${why.replace(/[\r\n]/g, ' ')}\nretry: ${retryMs}\n\n`);
  }

  /** Ends the stream, with a last chunk if given (one write for both). */
  end(last?: string): void {
    clearInterval(this.#heartbeat);
    if (this.#res.writableEnded) return;
    if (last !== undefined && !this.closed.aborted) this.#res.end(last);
    else this.#res.end();
  }
}
