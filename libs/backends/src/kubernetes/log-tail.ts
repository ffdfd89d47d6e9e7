import type { PodApi } from './api.ts';

/** `2026-11-25T02:30:00.1234Z` (RFC 3339, any fraction) → a key that sorts as the instants do. */
export function instantKey(ts: string): string | undefined {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(ts);
  if (!m) return undefined;
  const seconds = Date.parse(`${m[1]}${m[3]}`) / 1000;
  if (!Number.isFinite(seconds)) return undefined;
  return `${String(seconds).padStart(12, '0')}.${(m[2] ?? '').padEnd(9, '0')}`;
}

/**
 * Follows one container's log with plain GETs, never a stream: each read asks for the lines since the second of the
 * last line taken (`sinceTime`, `timestamps`) and keeps only the ones not seen yet, so a long run's log is never read
 * again from its start. A line is taken once it is complete (ends in a newline); `limitBytes` bounds every read.
 */
export class LogTail {
  #lastKey: string | undefined;
  #lastSecond: Date | undefined;
  /** Lines taken that carry #lastKey: a re-read skips as many of them. */
  #takenAtLast = 0;

  readonly #api: PodApi;
  readonly #pod: string;
  readonly #container: string;
  readonly #limitBytes: number;
  constructor(api: PodApi, pod: string, container: string, limitBytes: number) {
    this.#api = api;
    this.#pod = pod;
    this.#container = container;
    this.#limitBytes = limitBytes;
  }

  /** The complete lines written since the last read (without their newline). */
  async read(): Promise<string[]> {
    const raw = await this.#api.readLog(this.#pod, this.#container, {
      limitBytes: this.#limitBytes,
      ...(this.#lastSecond ? { sinceTime: this.#lastSecond } : {}),
    });
    const lines: string[] = [];
    let seenAtKey = 0;
    let key: string | undefined;
    // The last piece has no newline after it: a line still being written, or one limitBytes cut.
    for (const line of raw.split('\n').slice(0, -1)) {
      const space = line.indexOf(' ');
      const lineKey = instantKey(line.slice(0, space));
      if (space < 0 || lineKey === undefined) continue;
      seenAtKey = lineKey === key ? seenAtKey + 1 : 1;
      key = lineKey;
      if (this.#lastKey !== undefined && lineKey < this.#lastKey) continue;
      if (lineKey === this.#lastKey && seenAtKey <= this.#takenAtLast) continue;
      lines.push(line.slice(space + 1));
      if (lineKey === this.#lastKey) this.#takenAtLast = seenAtKey;
      else {
        this.#lastKey = lineKey;
        this.#takenAtLast = seenAtKey;
        this.#lastSecond = new Date(Math.floor(Number(lineKey.split('.')[0])) * 1000);
      }
    }
    return lines;
  }
}
