/**
 * How fast this machine runs code right now, so that CPU time measured on a shared machine can be compared between
 * runs. On the 2-vCPU VM the benches run on, the same fixed piece of JavaScript takes twice as long at one moment as a
 * few seconds later, with no context switch in between (its neighbours share the host's cores), and sandgate's CPU per
 * execution moves as much: 6.2–11.1 ms on the accept path over five runs at a load average of 13–24. A bench calls
 * `probe()` once per sample, beside the samples it measures; the median CPU time of that fixed chunk says how slow the
 * machine was meanwhile, and `normalize` turns CPU milliseconds measured at that speed into milliseconds at the
 * reference speed (the chunk in REFERENCE_CHUNK_US). Over the same five runs the accept path's normalized figure moved
 * 3.95–4.70 ms.
 */
import { percentile, round } from './stats.ts';

/**
 * What the chunk takes at the machine's best speed (2 × AMD EPYC vCPU, Node 20): 92–110 µs in a tight loop. Inside a
 * bench, where it runs right after the process wakes from waiting on a request, it took 140–290 µs at a load of 13–24.
 */
export const REFERENCE_CHUNK_US = 100;

/** A fixed piece of work of the kind a Node server does: building small JSON documents. */
function chunk(): number {
  let n = 0;
  for (let i = 0; i < 200; i++) n += JSON.stringify({ id: i, tags: [1, 2, 3], note: `hello world ${i}` }).length;
  return n;
}

export class SpeedProbe {
  /** CPU time of each chunk (µs): time the process was preempted meanwhile is not in it, as it is not in sandgate's. */
  readonly #cpuUs: number[] = [];
  /** Wall time of each chunk (µs), for comparison. */
  readonly #wallUs: number[] = [];

  constructor() {
    // Compiled by V8 before the first timed run.
    for (let i = 0; i < 300; i++) chunk();
  }

  /**
   * Times the chunk `times` times. Answers what the chunks computed, so that the compiler cannot drop the work.
   */
  probe(times = 3): number {
    let n = 0;
    for (let k = 0; k < times; k++) {
      const t0 = process.hrtime.bigint();
      const c0 = process.cpuUsage();
      n += chunk();
      const c = process.cpuUsage(c0);
      this.#wallUs.push(Number(process.hrtime.bigint() - t0) / 1000);
      this.#cpuUs.push(c.user + c.system);
    }
    return n;
  }

  /** Median CPU time of the chunk over the probes so far, in µs. */
  get chunkUs(): number {
    return median(this.#cpuUs);
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
  report(): { speed_chunk_us: number; speed_chunk_wall_us: number; speed_slowdown: number } {
    return {
      speed_chunk_us: round(this.chunkUs),
      speed_chunk_wall_us: round(median(this.#wallUs)),
      speed_slowdown: round(this.slowdown, 3),
    };
  }
}

const median = (values: number[]): number =>
  percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
