/** How busy the machine was while a bench ran: the load average and the kernel's CPU pressure (PSI). */
import { readFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { round } from './stats.ts';

/** µs during which some runnable task waited for a CPU, since boot (/proc/pressure/cpu), or null without PSI. */
async function cpuPressureUs(): Promise<number | null> {
  const text = await readFile('/proc/pressure/cpu', 'utf8').catch(() => '');
  const m = /^some .*total=(\d+)/m.exec(text);
  return m ? Number(m[1]) : null;
}

export interface Contention {
  load1_start: number;
  load1_end: number;
  /** Share of the wall time (%) during which some task waited for a CPU: 0 on an idle machine, ~100 saturated. */
  cpu_pressure_pct: number | null;
}

/** Starts watching; `end()` answers what the machine was like in between. */
export async function watchContention(): Promise<{ end(): Promise<Contention> }> {
  const load1Start = loadavg()[0]!;
  const p0 = await cpuPressureUs();
  const t0 = performance.now();
  return {
    async end() {
      const p1 = await cpuPressureUs();
      const wallUs = (performance.now() - t0) * 1000;
      return {
        load1_start: round(load1Start),
        load1_end: round(loadavg()[0]!),
        cpu_pressure_pct: p0 === null || p1 === null ? null : round((100 * (p1 - p0)) / wallUs, 1),
      };
    },
  };
}
