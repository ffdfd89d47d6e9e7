import { StringDecoder } from 'node:string_decoder';
import { Writable } from 'node:stream';

/** Default cap on the bytes kept per stream (stdout, stderr), as SANDGATE_MAX_OUTPUT_BYTES. */
export const DEFAULT_MAX_OUTPUT_BYTES = 100_000;

/**
 * Captures one output stream of a sandbox up to a byte cap. Text is forwarded as it arrives (to the
 * EventSink) and kept for the result; past the cap the bytes are only counted and dropped, so a flood
 * neither grows memory nor back-pressures the sandbox (a blocked pipe would stall the program, not stop it).
 */
export class OutputCollector {
  readonly #forward: (text: string) => void;
  readonly #maxBytes: number;
  // A multi-byte character split across chunks is held back until its last byte arrives.
  readonly #decoder = new StringDecoder('utf8');
  readonly #kept: string[] = [];
  #keptBytes = 0;
  #totalBytes = 0;
  #ended = false;

  constructor(forward: (text: string) => void, maxBytes: number = DEFAULT_MAX_OUTPUT_BYTES) {
    this.#forward = forward;
    this.#maxBytes = maxBytes;
  }

  /** Feeds raw bytes as the sandbox wrote them. */
  write(chunk: Uint8Array): void {
    this.#totalBytes += chunk.length;
    const room = this.#maxBytes - this.#keptBytes;
    if (room <= 0 || this.#ended) return;
    const take = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.#keptBytes += take.length;
    this.#emit(this.#decoder.write(Buffer.from(take.buffer, take.byteOffset, take.length)));
  }

  /** Flushes what the decoder still holds; a character cut by the cap or the end becomes U+FFFD. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    // Bytes held back at the cap belong to a character that did not fit: drop them rather than mangle it.
    if (!this.truncated) this.#emit(this.#decoder.end());
  }

  /** The captured text: at most `maxBytes` bytes of what the sandbox wrote, decoded. */
  get text(): string {
    return this.#kept.join('');
  }

  /** True when the stream carried more bytes than the cap. */
  get truncated(): boolean {
    return this.#totalBytes > this.#maxBytes;
  }

  /** Every byte the stream carried, kept or dropped. */
  get totalBytes(): number {
    return this.#totalBytes;
  }

  /** A Writable that feeds this collector and never pushes back (demuxers ignore back-pressure anyway). */
  writable(): Writable {
    return new Writable({
      write: (chunk: Buffer, _encoding, callback) => {
        this.write(chunk);
        callback();
      },
    });
  }

  #emit(text: string): void {
    if (text.length === 0) return;
    this.#kept.push(text);
    this.#forward(text);
  }
}
