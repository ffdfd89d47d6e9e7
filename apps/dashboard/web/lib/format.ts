import type { Execution } from '@sandgate/contracts';

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** How long a run took, or has been going. */
export function runDuration(e: Execution, now = Date.now()): string {
  if (e.result) return duration(e.result.duration_ms);
  if (e.started_at) return `${duration(now - Date.parse(e.started_at))}…`;
  return '—';
}

export const time = (iso: string) => new Date(iso).toLocaleString();
export const clock = (iso: string) => new Date(iso).toLocaleTimeString();
