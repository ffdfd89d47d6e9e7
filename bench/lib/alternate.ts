/**
 * Samples of sandgate and of the baseline it is compared with, in alternating blocks: a block of sandgate runs, a
 * pause for its last run's tail, then as many baseline runs, and again, so that a busy minute on a shared machine
 * hits both alike. Sandgate's CPU is counted over its own blocks only (each from just before its first run to the
 * end of the pause after its last), so that what the process spends while the baseline runs — its timers and
 * watchdogs, 5–12 ms a second on the bench machine, whatever the baseline's length — is not charged to its runs.
 */
import { moreSamples } from './knobs.ts';
import { round, sleep } from './stats.ts';

/** After a block, how long sandgate gets to finish its last run's work (BullMQ's completion, lease release). */
const TAIL_MS = 50;

export interface Alternation {
  /** Sandgate runs made (the baseline made as many). */
  samples: number;
  /** Sandgate's CPU (ms) over its blocks. */
  cpuMs: number;
  /** Sandgate's CPU per run (ms) in each block: how much it moved during the figure. */
  cpuMsPerRunByBlock: number[];
  /** The baseline's CPU (ms) over its own blocks, counted the same way; null when `baselineCpuMs` was not given. */
  baselineCpuMs: number | null;
}

/**
 * Up to `n` samples of each (fewer when BENCH_SAMPLE_S cuts the sampling short), in blocks of `block`.
 * `cpuMs` answers the CPU sandgate's processes have used so far.
 */
export async function alternate(opts: {
  n: number;
  block: number;
  sandgate(i: number): Promise<void>;
  baseline(i: number): Promise<void>;
  cpuMs(): Promise<number>;
  /** The CPU the baseline's processes have used so far, when the baseline is a process of its own. */
  baselineCpuMs?(): Promise<number>;
}): Promise<Alternation> {
  const t0 = performance.now();
  let cpuMs = 0;
  let baselineCpuMs = 0;
  const byBlock: number[] = [];
  let i = 0;
  while (moreSamples(i, opts.n, t0)) {
    const first = i;
    const c0 = await opts.cpuMs();
    for (; i - first < opts.block && moreSamples(i, opts.n, t0); i++) await opts.sandgate(i);
    await sleep(TAIL_MS);
    const used = (await opts.cpuMs()) - c0;
    cpuMs += used;
    byBlock.push(round(used / (i - first)));
    const b0 = await opts.baselineCpuMs?.();
    for (let j = first; j < i; j++) await opts.baseline(j);
    if (opts.baselineCpuMs) {
      await sleep(TAIL_MS);
      baselineCpuMs += (await opts.baselineCpuMs()) - b0!;
    }
  }
  return {
    samples: i,
    cpuMs,
    cpuMsPerRunByBlock: byBlock,
    baselineCpuMs: opts.baselineCpuMs ? baselineCpuMs : null,
  };
}
