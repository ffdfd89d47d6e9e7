/**
 * Memory of the gateway and worker child processes around a scenario: RSS before, the peak during it
 * (VmHWM after resetting it through /proc/<pid>/clear_refs, and RSS sampled every 20 ms), RSS after.
 */
import { writeFile } from 'node:fs/promises';
import { memoryOf } from './proc.ts';
import type { Stack } from './stack.ts';
import { emit, round, sleep, summarize, type Figure } from './stats.ts';

const LIMIT_MB = 50;

export interface MemoryReport {
  beforeMb: number;
  peakMb: number;
  afterMb: number;
  growthMb: number;
}

export async function measureMemory(
  stack: Stack,
  runs: number,
  scenario: () => Promise<void>,
): Promise<{ reports: Record<string, MemoryReport>; durations: number[] }> {
  const procs = stack.procs;
  const before: Record<string, number> = {};
  const peak: Record<string, number> = {};
  for (const p of procs) {
    // "5" resets the peak RSS (VmHWM) to the current RSS (Linux ≥ 4.0).
    await writeFile(`/proc/${p.pid}/clear_refs`, '5').catch(() => {});
    before[p.name] = (await memoryOf(p.pid)).rssMb;
    peak[p.name] = before[p.name]!;
  }
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      for (const p of procs) {
        const m = await memoryOf(p.pid).catch(() => null);
        if (m) peak[p.name] = Math.max(peak[p.name]!, m.rssMb);
      }
      await sleep(20);
    }
  })();
  const durations: number[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      await scenario();
      durations.push(performance.now() - t0);
    }
  } finally {
    sampling = false;
    await sampler;
  }
  const reports: Record<string, MemoryReport> = {};
  for (const p of procs) {
    const m = await memoryOf(p.pid);
    const peakMb = Math.max(peak[p.name]!, m.hwmMb);
    reports[p.name] = {
      beforeMb: round(before[p.name]!, 1),
      peakMb: round(peakMb, 1),
      afterMb: round(m.rssMb, 1),
      growthMb: round(peakMb - before[p.name]!, 1),
    };
  }
  return { reports, durations };
}

export function emitMemory(
  bench: string,
  target: string,
  r: { reports: Record<string, MemoryReport>; durations: number[] },
  extra: Record<string, unknown>,
  stops: Record<string, string>,
): Figure {
  const flat: Record<string, number> = {};
  for (const [name, m] of Object.entries(r.reports)) {
    flat[`${name}_rss_before_mb`] = m.beforeMb;
    flat[`${name}_rss_peak_mb`] = m.peakMb;
    flat[`${name}_rss_after_mb`] = m.afterMb;
    flat[`${name}_rss_growth_mb`] = m.growthMb;
  }
  const worst = Math.max(...Object.values(r.reports).map((m) => m.growthMb));
  return emit({
    bench,
    ...summarize(r.durations),
    ...flat,
    ...extra,
    process_stop: stops,
    target,
    pass: worst <= LIMIT_MB,
  });
}

export const MEMORY_TARGET = `each process's RSS grows <= ${LIMIT_MB} MB (peak over before)`;
