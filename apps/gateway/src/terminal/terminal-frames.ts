/**
 * The frames a terminal's connection to the sandbox agent carries once open
 * (images/runtime/agent/sandgate_terminal.py): one byte of type, four of length (big-endian), then the payload.
 */
export const FRAME = { data: 0, resize: 1, exit: 2 } as const;
const HEADER = 5;
/** The agent's limit on a frame's payload, and the most one websocket message of input may carry. */
export const MAX_FRAME = 65_536;

export function frame(type: number, payload: Uint8Array): Buffer {
  const head = Buffer.alloc(HEADER);
  head.writeUInt8(type, 0);
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

export function resizeFrame(cols: number, rows: number): Buffer {
  const size = Buffer.alloc(4);
  size.writeUInt16BE(cols, 0);
  size.writeUInt16BE(rows, 2);
  return frame(FRAME.resize, size);
}

/** Splits what the agent sends into frames, whatever the chunks; throws on a frame larger than MAX_FRAME. */
export class FrameReader {
  #buffer: Buffer = Buffer.alloc(0);

  *push(chunk: Buffer): Generator<{ type: number; payload: Buffer }> {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    while (this.#buffer.length >= HEADER) {
      const size = this.#buffer.readUInt32BE(1);
      if (size > MAX_FRAME) throw new Error(`the sandbox agent sent a frame of ${size} bytes`);
      if (this.#buffer.length < HEADER + size) return;
      const type = this.#buffer.readUInt8(0);
      const payload = this.#buffer.subarray(HEADER, HEADER + size);
      this.#buffer = this.#buffer.subarray(HEADER + size);
      yield { type, payload };
    }
  }
}
