import { finished, Readable, Writable } from 'node:stream';
import type Dockerode from 'dockerode';
import { entryOf, format, type Entry } from './log-entries.ts';
import type { LogQuery, LogView } from './pod-logs.ts';

/** The log as the discrete read found it. */
export interface LogSoFar {
  /** Every entry the engine had. */
  written: Entry[];
  /** The newest of them, which a lagging runtime has not delivered yet. */
  held: Entry[];
  /** What the discrete read shows, narrowed and formatted. */
  shown: Buffer[];
}

export interface FollowOptions {
  /** Only lines written at or after this time (ns), as the discrete read keeps them; undefined for all. */
  since: bigint | undefined;
  query: LogQuery;
  view: LogView;
}

/**
 * follow=true as the kubelet serves it: what a discrete read shows now, then each line the container writes, until
 * it stops (the kubelet follows one container instance) or limitBytes is reached. New lines come from the engine's
 * followed log, started at the time of the last line already written with those repeated lines skipped, so the join
 * neither repeats nor drops a line. A lagging runtime (`lagMs`) holds each line back as long as it holds it back
 * from a discrete read; a rotation does not cut a follower, as the kubelet reopens the new file. Destroying the
 * answer (the client went away) destroys the engine's stream.
 */
export async function followLog(container: Dockerode.Container, log: LogSoFar, opts: FollowOptions): Promise<Readable> {
  const out = limitedOutput(opts.query.limitBytes);
  for (const b of log.shown) out.send(b);
  if (out.done()) return out.stream;
  const source = await openFollow(container, log.written.at(-1));
  if (!source) return out.finish();
  out.attach(source);
  const isNew = unseen(log.written);
  const sink = lineSink(out, opts, (chunk) => {
    if (!Buffer.isBuffer(chunk)) return chunk;
    const e = entryOf(chunk);
    return e && isNew(e) ? e : undefined;
  });
  for (const e of log.held) sink.write(e);
  // Docker's own demultiplexing: one write per frame, stdout and stderr in the order they were logged.
  container.modem.demuxStream(source, sink, sink);
  source.on('error', () => {});
  source.once('close', () => sink.writableEnded || sink.end());
  return out.stream;
}

/**
 * Where the lines go, in order: held entries, then the engine's frames (`entry` makes an entry of either, or drops
 * it). Those at or after `since` go out once the runtime's lag has passed; the end of the input ends the answer.
 */
function lineSink(out: Output, opts: FollowOptions, entry: (chunk: Buffer | Entry) => Entry | undefined): Writable {
  return new Writable({
    objectMode: true,
    write(chunk: Buffer | Entry, _encoding, done) {
      const e = entry(chunk);
      if (!e || (opts.since !== undefined && e.ns < opts.since)) return done();
      const send = () => {
        out.send(format(e, opts.query.timestamps));
        done();
      };
      const wait = Number(e.ns / 1_000_000n) + opts.view.lagMs - Date.now();
      if (wait > 0) setTimeout(send, wait);
      else send();
    },
    final(done) {
      out.finish();
      done();
    },
  });
}

/** The engine's followed log (multiplexed frames, timestamps on) from the time of `after`; undefined once gone. */
async function openFollow(container: Dockerode.Container, after: Entry | undefined): Promise<Readable | undefined> {
  const since = after && `${after.ns / 1_000_000_000n}.${String(after.ns % 1_000_000_000n).padStart(9, '0')}`;
  try {
    const stream = await container.logs({
      follow: true,
      stdout: true,
      stderr: true,
      timestamps: true,
      ...(since ? { since } : {}),
    });
    return stream as unknown as Readable;
  } catch {
    return undefined;
  }
}

/** Whether a followed entry is new: the followed log starts with the lines logged at the last time already read. */
function unseen(written: Entry[]): (e: Entry) => boolean {
  const last = written.at(-1);
  if (!last) return () => true;
  let repeated = written.filter((e) => e.ns === last.ns).length;
  return (e) => e.ns > last.ns || (e.ns === last.ns && repeated-- <= 0);
}

type Output = ReturnType<typeof limitedOutput>;

/** The answer's stream: ends once `limitBytes` have gone out (cut wherever the count ends), or at `finish()`. */
function limitedOutput(limitBytes: number | undefined) {
  let left = limitBytes ?? Infinity;
  let ended = false;
  let source: Readable | undefined;
  const stream = new Readable({
    read() {},
    destroy(err, callback) {
      if (!source) return callback(err);
      source.destroy();
      finished(source, () => callback(err));
    },
  });
  const finish = (): Readable => {
    if (!ended) stream.push(null);
    ended = true;
    return stream;
  };
  const send = (bytes: Buffer): void => {
    if (ended || stream.destroyed) return;
    const part = bytes.subarray(0, left);
    left -= part.length;
    if (part.length) stream.push(part);
    if (left <= 0) {
      finish();
      source?.destroy();
    }
  };
  return { stream, send, finish, done: () => ended, attach: (s: Readable) => void (source = s) };
}
