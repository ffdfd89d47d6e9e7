/**
 * How fast this machine runs code right now, so that CPU time measured on a shared machine can be compared between
 * runs. On the 2-vCPU VM the benches run on, the same fixed piece of JavaScript takes 1.8× longer at one moment than a
 * second later, with no context switch in between (its neighbours share the host's cores), and so does everything
 * else: sandgate's CPU per execution moved as much (4–5 ms quiet, 8–13 ms at a load average of 20). A bench calls
 * `probe()` once per sample, beside the samples it measures; the median duration of that fixed chunk says how slow
 * the machine was meanwhile, and `normalize` turns CPU milliseconds measured at that speed into milliseconds at the
 * reference speed (the chunk in REFERENCE_CHUNK_US). Measured the same way at a load average of 18–21, sandgate's raw
 * CPU per execution over ten blocks moved 7.8–13.2 ms and the normalized figure 46.7–57 chunk-units.
 */
import { percentile, round } from './stats.ts';

/** What the chunk takes on this machine unloaded (2 × AMD EPYC vCPU, Node 20): 94–104 µs in uninterrupted runs. */
export const REFERENCE_CHUNK_US = 100;

/** A fixed piece of work of the kind a Node server does: building small JSON documents. */
function chunk(): number {
  let n = 0;
  for (let i = 0; i < 200; i++) n += JSON.stringify({ id: i, tags: [1, 2, 3], note: `hello world ${i}` }).length;
  return n;
}

export class SpeedProbe {
  readonly #us: number[] = [];

  constructor() {
    // Compiled by V8 before the first timed run.
    for (let i = 0; i < 300; i++) chunk();
  }

  /**
   * Times the chunk once (wall clock: a run that was preempted is an outlier the median leaves out). Answers what the
   * chunk computed, so that the compiler cannot drop the work.
   */
  probe(): number {
    const t0 = process.hrtime.bigint();
    const n = chunk();
    this.#us.push(Number(process.hrtime.bigint() - t0) / 1000);
    return n;
  }

  /** Median duration of the chunk over the probes so far, in µs. */
  get chunkUs(): number {
    return percentile(
      [...this.#us].sort((a, b) => a - b),
      50,
    );
  }

  /** How much slower than the reference the machine ran during the probes (1 = as fast). */
  get slowdown(): number {
    return this.chunkUs / REFERENCE_CHUNK_US;
  }

  /** CPU ms measured during the probes, as it would have been at the reference speed. */
  normalize(cpuMs: number): number {
    return round(cpuMs / this.slowdown);
  }

  /** What a figure reports of the probe. */
  report(): { speed_chunk_us: number; speed_slowdown: number } {
    return { speed_chunk_us: round(this.chunkUs), speed_slowdown: round(this.slowdown, 3) };
  }
}
