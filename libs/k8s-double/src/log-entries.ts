/** One line (or part of a line) as the runtime logged it, with its time in nanoseconds. */
export interface Entry {
  ts: string;
  ns: bigint;
  bytes: Buffer;
}

/** An RFC 3339 time with up to nine fraction digits, as nanoseconds since the epoch. */
export function nanos(ts: string): bigint {
  const m = /^(.*?:\d\d)(?:\.(\d+))?Z$/.exec(ts);
  if (!m) return 0n;
  return BigInt(Date.parse(`${m[1]}Z`)) * 1_000_000n + BigInt((m[2] ?? '').padEnd(9, '0').slice(0, 9));
}

/** Splits `docker logs` output (8-byte frame headers, timestamps on) into entries, stdout and stderr in order. */
export function parseDockerLog(buf: Buffer): Entry[] {
  const out: Entry[] = [];
  for (let at = 0; at + 8 <= buf.length;) {
    const size = buf.readUInt32BE(at + 4);
    const entry = entryOf(buf.subarray(at + 8, at + 8 + size));
    at += 8 + size;
    if (entry) out.push(entry);
  }
  return out;
}

/** One frame's payload of `docker logs` with timestamps on: `<RFC 3339 nano time> <text>`. */
export function entryOf(payload: Buffer): Entry | undefined {
  const space = payload.indexOf(0x20);
  if (space < 0) return undefined;
  const ts = payload.subarray(0, space).toString('latin1');
  return { ts, ns: nanos(ts), bytes: payload.subarray(space + 1) };
}

/** One entry as pods/log writes it: its bytes, after its time when timestamps is on. */
export function format(e: Entry, timestamps: boolean): Buffer {
  return timestamps ? Buffer.concat([Buffer.from(`${e.ts} `), e.bytes]) : e.bytes;
}
