/**
 * Splits Docker's multiplexed attach stream (Tty false): frames of an 8-byte header (byte 0: 1 stdout,
 * 2 stderr; bytes 4-7: big-endian length) and a payload. Unlike docker-modem's demuxStream it hands the
 * payloads to callbacks, so the caller knows when the stream ends (demuxStream never ends its outputs).
 */
export class AttachDemuxer {
  readonly #onStdout: (payload: Buffer) => void;
  readonly #onStderr: (payload: Buffer) => void;
  #buffer: Buffer = Buffer.alloc(0);

  constructor(onStdout: (payload: Buffer) => void, onStderr: (payload: Buffer) => void) {
    this.#onStdout = onStdout;
    this.#onStderr = onStderr;
  }

  push(chunk: Buffer): void {
    let data = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    while (data.length >= 8) {
      const size = data.readUInt32BE(4);
      if (data.length < 8 + size) break;
      const payload = data.subarray(8, 8 + size);
      if (data[0] === 1) this.#onStdout(payload);
      else if (data[0] === 2) this.#onStderr(payload);
      data = data.subarray(8 + size);
    }
    this.#buffer = data.length === 0 ? Buffer.alloc(0) : Buffer.from(data);
  }
}
