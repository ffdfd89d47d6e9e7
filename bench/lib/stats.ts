/** Percentiles and the one JSON line each figure prints. */

export interface Summary {
  n: number;
  p50_ms: number;
  p95_ms: number;
  p99_ms: number;
  mean_ms: number;
  min_ms: number;
  max_ms: number;
}

/** Nearest-rank percentile of an ascending array (`p` in 0..100). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export const round = (x: number, digits = 2): number => (Number.isFinite(x) ? Number(x.toFixed(digits)) : x);

export function summarize(samples: readonly number[]): Summary {
  const s = [...samples].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / (s.length || 1);
  return {
    n: s.length,
    p50_ms: round(percentile(s, 50)),
    p95_ms: round(percentile(s, 95)),
    p99_ms: round(percentile(s, 99)),
    mean_ms: round(s.length ? mean : NaN),
    min_ms: round(s[0] ?? NaN),
    max_ms: round(s[s.length - 1] ?? NaN),
  };
}

/**
 * p25(samples) / p25(baseline): on a busy machine a share of the samples of either side waits for a CPU, which moves
 * the medians; the lower quartiles are runs that mostly did not, so their ratio moves less (reported beside `ratio`).
 */
export function ratioP25(samples: readonly number[], baseline: readonly number[]): number {
  const q = (a: readonly number[]) =>
    percentile(
      [...a].sort((x, y) => x - y),
      25,
    );
  return round(q(samples) / q(baseline), 3);
}

/** Median of each named segment over many samples. */
export function medians(rows: readonly Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  const names = new Set(rows.flatMap((r) => Object.keys(r)));
  for (const name of names) {
    const values = rows.map((r) => r[name]).filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
    out[name] = round(
      percentile(
        [...values].sort((a, b) => a - b),
        50,
      ),
    );
  }
  return out;
}

export interface Figure extends Partial<Summary> {
  bench: string;
  target: string;
  pass: boolean;
  ratio?: number;
  error?: string;
  [extra: string]: unknown;
}

const emitted: Record<string, unknown>[] = [];

/** The figures printed since the last call (what a bench answers bench:ci after a round: bench/lib/main.ts). */
export const takeEmitted = (): Record<string, unknown>[] => emitted.splice(0);

/** Prints one figure as one JSON line on stdout (what run-all collects) and returns it. */
export function emit(figure: Figure): Figure {
  const { bench, n, p50_ms, p95_ms, p99_ms, mean_ms, target, ratio, pass, ...extra } = figure;
  const ordered = {
    bench,
    n,
    p50_ms,
    p95_ms,
    p99_ms,
    mean_ms,
    ...extra,
    target,
    ...(ratio === undefined ? {} : { ratio: round(ratio, 3) }),
    pass,
  };
  process.stdout.write(`${JSON.stringify(ordered)}\n`);
  emitted.push(ordered);
  return figure;
}

/** A figure that could not be measured: the bench goes on, the line says why. */
export function emitError(bench: string, target: string, err: unknown, extra: Record<string, unknown> = {}): Figure {
  const message = err instanceof Error ? err.message : String(err);
  return emit({
    bench,
    n: 0,
    p50_ms: NaN,
    p95_ms: NaN,
    p99_ms: NaN,
    mean_ms: NaN,
    ...extra,
    error: message,
    target,
    pass: false,
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
