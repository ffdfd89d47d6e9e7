import type { Artifact, ExecutionResult } from '@sandgate/contracts';
import type { Redis } from 'ioredis';
import { readStream } from './event-hub.ts';

/** What a run's event stream says it printed and made: the part of a result its events carry. */
export type StreamedParts = Pick<
  ExecutionResult,
  'stdout' | 'stderr' | 'stdout_truncated' | 'stderr_truncated' | 'artifacts'
>;

/**
 * Reads back what a run streamed (stdout, stderr, artifacts) from its event stream, for a result that no worker wrote:
 * a run whose worker was lost ends with the output its clients saw, not with none. Each output keeps at most
 * `maxBytes` (SANDGATE_MAX_OUTPUT_BYTES) and says when it was cut, as a worker's result does; an artifact reported
 * twice counts once, as its last report.
 */
export async function streamedParts(
  redis: Pick<Redis, 'xrange'>,
  eventsKey: string,
  maxBytes: number,
): Promise<StreamedParts> {
  const out = { stdout: new Capped(maxBytes), stderr: new Capped(maxBytes) };
  const artifacts = new Map<string, Artifact>();
  for await (const { type, data } of readStream(redis, eventsKey)) {
    if (type === 'stdout' || type === 'stderr') out[type].add((JSON.parse(data) as { text: string }).text);
    else if (type === 'artifact') {
      const { artifact } = JSON.parse(data) as { artifact: Artifact };
      artifacts.set(artifact.path, artifact);
    }
  }
  return {
    stdout: out.stdout.text,
    stderr: out.stderr.text,
    stdout_truncated: out.stdout.truncated,
    stderr_truncated: out.stderr.truncated,
    artifacts: [...artifacts.values()],
  };
}

/** Text kept up to a number of UTF-8 bytes, never cutting a character in two. */
class Capped {
  text = '';
  truncated = false;
  #bytes = 0;

  readonly #max: number;
  constructor(max: number) {
    this.#max = max;
  }

  add(chunk: string): void {
    if (this.truncated) return;
    const size = Buffer.byteLength(chunk);
    if (this.#bytes + size <= this.#max) {
      this.text += chunk;
      this.#bytes += size;
      return;
    }
    const room = Buffer.from(chunk)
      .subarray(0, this.#max - this.#bytes)
      .toString('utf8');
    // A character cut at the end decodes as U+FFFD: drop it.
    this.text += room.endsWith('\uFFFD') ? room.slice(0, -1) : room;
    this.#bytes = this.#max;
    this.truncated = true;
  }
}
