import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

/**
 * A Server-Sent Events writer on a raw response: owns ids and backpressure, heartbeats with
 * comments, and resolves pending writes when the client goes away (so nothing hangs on a dead socket).
 */
export class SseWriter {
  readonly closed: AbortSignal;
  private readonly ac = new AbortController();
  private readonly heartbeat: NodeJS.Timeout;

  constructor(
    private readonly res: ServerResponse,
    headers: OutgoingHttpHeaders,
    opts: { heartbeatMs: number; retryMs: number },
  ) {
    this.closed = this.ac.signal;
    res.on('close', () => this.ac.abort());
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...headers,
    });
    res.write(`retry: ${opts.retryMs}\n\n`);
    this.heartbeat = setInterval(() => void this.write(': heartbeat\n\n'), opts.heartbeatMs);
  }

  /** Sends one event; `id` and `event` must not contain newlines, `data` is sent line by line. */
  send(ev: { id?: string; event: string; data: string }): Promise<void> {
    if (/[\r\n]/.test(ev.event) || (ev.id && /[\r\n]/.test(ev.id)))
      throw new Error('SSE id/event must not contain newlines');
    const data = ev.data
      .split(/\r\n|\r|\n/)
      .map((l) => `data: ${l}\n`)
      .join('');
    return this.write(`${ev.id ? `id: ${ev.id}\n` : ''}event: ${ev.event}\n${data}\n`);
  }

  private write(chunk: string): Promise<void> {
    if (this.closed.aborted) return Promise.resolve();
    if (this.res.write(chunk)) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        this.res.off('drain', done);
        this.res.off('close', done);
        resolve();
      };
      this.res.once('drain', done);
      this.res.once('close', done);
    });
  }

  /** Tells the client to reconnect (with Last-Event-ID) after `retryMs`, e.g. to another replica; then end(). */
  async reconnect(retryMs: number, why: string): Promise<void> {
    await this.write(`: ${why.replace(/[\r\n]/g, ' ')}\nretry: ${retryMs}\n\n`);
  }

  end(): void {
    clearInterval(this.heartbeat);
    if (!this.res.writableEnded) this.res.end();
  }
}
