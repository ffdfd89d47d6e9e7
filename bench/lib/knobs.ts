/** Sample counts and other knobs, from the environment so a quick or a thorough run needs no edit. */

function int(name: string, dflt: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return dflt;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < 0) throw new Error(`${name} must be a non-negative integer (got "${raw}")`);
  return v;
}

/** Latency samples per figure (BENCH_N, default 40); figures that are cheap take a multiple of it. */
export const N = int('BENCH_N', 40);
/** Runs discarded before measuring (BENCH_WARMUP, default 3). */
export const WARMUP = int('BENCH_WARMUP', 3);
/** Executions in each throughput figure of real containers (BENCH_THROUGHPUT_N, default 40). */
export const THROUGHPUT_N = int('BENCH_THROUGHPUT_N', 40);
/** Concurrent clients in those throughput figures (BENCH_CONCURRENCY, default 4). */
export const CONCURRENCY = int('BENCH_CONCURRENCY', 4);
/** Executions accepted in the gateway-overhead throughput figure (BENCH_ACCEPT_N, default 5000). */
export const ACCEPT_N = int('BENCH_ACCEPT_N', 5000);
/**
 * Runs of the accept path before gateway-overhead measures (BENCH_ACCEPT_WARMUP, default 1,000): V8 has compiled the
 * path only after about a thousand (see the bench).
 */
export const ACCEPT_WARMUP = int('BENCH_ACCEPT_WARMUP', 1000);
/** Keep-alive connections of that figure (BENCH_ACCEPT_CONNECTIONS, default 64). */
export const ACCEPT_CONNECTIONS = int('BENCH_ACCEPT_CONNECTIONS', 64);
/** SSE subscribers on one execution (BENCH_SSE_SUBSCRIBERS, default 1000). */
export const SSE_SUBSCRIBERS = int('BENCH_SSE_SUBSCRIBERS', 1000);
/** Idle SSE clients held open on one execution (BENCH_SSE_IDLE, default 10,000), and for how long (ms). */
export const SSE_IDLE = int('BENCH_SSE_IDLE', 10_000);
export const SSE_IDLE_HOLD_MS = int('BENCH_SSE_IDLE_HOLD_MS', 20_000);
/** Pause between warm-pool samples so the pool refills (BENCH_POOL_PACE_MS, default 1000). */
export const POOL_PACE_MS = int('BENCH_POOL_PACE_MS', 1000);
/**
 * The raw run http-oneshot-pool interleaves with its samples (BENCH_POOL_BASELINE): `cold` (default, raw-docker-cold)
 * or `exec` (raw-docker-exec into a running container).
 */
export const POOL_BASELINE = ((): 'cold' | 'exec' => {
  const v = process.env.BENCH_POOL_BASELINE || 'cold';
  if (v !== 'cold' && v !== 'exec') throw new Error(`BENCH_POOL_BASELINE must be cold or exec (got "${v}")`);
  return v;
})();
/**
 * How long a stack may take to answer /readyz (BENCH_READY_TIMEOUT_S, default 180): a sandgate process loads for
 * 3-25 s on a quiet machine, and for 50 s and more at a load average of 15-20 on two cores.
 */
export const READY_TIMEOUT_S = int('BENCH_READY_TIMEOUT_S', 180);
/** Repetitions of each memory scenario (BENCH_MEMORY_RUNS, default 3). */
export const MEMORY_RUNS = int('BENCH_MEMORY_RUNS', 3);

/**
 * BENCH_SAMPLE_S: a latency figure stops taking samples after this many seconds (0, the default: no limit) once it has
 * a quarter of those it asked for, so that a run on a busy machine ends in bounded time with fewer samples (the
 * figure's `n` says how many). Warm-ups are not counted.
 */
export const SAMPLE_S = int('BENCH_SAMPLE_S', 0);

/** Whether a sampling loop started at `startedAt` (performance.now()) takes sample number `i` (from 0) of `n`. */
export function moreSamples(i: number, n: number, startedAt: number): boolean {
  if (i >= n) return false;
  if (SAMPLE_S === 0 || i < Math.ceil(n / 4)) return true;
  return performance.now() - startedAt < SAMPLE_S * 1000;
}

/**
 * BENCH_FIGURES=name,name: only these figures are measured by a bench that makes several (e.g. `http-oneshot-pool`
 * without `http-oneshot-pool-throughput`); default every one.
 */
const FIGURES = (process.env.BENCH_FIGURES ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
export const wanted = (figure: string): boolean => FIGURES.length === 0 || FIGURES.includes(figure);

/**
 * BENCH_API_KEYS=1: each stack runs with an API key (SANDGATE_API_KEYS) and every request of the benches carries it,
 * as a deployment with tenants runs; default off (open mode, as `npm run quickstart` starts).
 */
export const API_KEYS = process.env.BENCH_API_KEYS === '1';

/** Raw cold p50 and throughput from raw-docker-cold earlier in the same `npm run bench` (set by run-all). */
export const rawColdFromRun = (): { p50Ms: number | null; perSecond: number | null } => {
  const p = Number(process.env.BENCH_RAW_COLD_P50_MS);
  const t = Number(process.env.BENCH_RAW_COLD_PER_S);
  return { p50Ms: Number.isFinite(p) && p > 0 ? p : null, perSecond: Number.isFinite(t) && t > 0 ? t : null };
};
