import { EventEmitter } from 'node:events';
import type { Readable } from 'node:stream';

/** The streamed answers (watches, followed logs) still open, so a test can see each one end and free its source. */
export class OpenStreams {
  readonly #open = new Set<Readable>();
  readonly #events = new EventEmitter();

  add(stream: Readable): void {
    this.#open.add(stream);
    stream.once('close', () => {
      this.#open.delete(stream);
      if (this.#open.size === 0) this.#events.emit('idle');
    });
  }

  get size(): number {
    return this.#open.size;
  }

  /** Resolves once no stream is open (at once when none is). */
  idle(): Promise<void> {
    if (this.#open.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#events.once('idle', resolve));
  }
}
