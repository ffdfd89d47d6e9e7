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
/** Keep-alive connections of that figure (BENCH_ACCEPT_CONNECTIONS, default 64). */
export const ACCEPT_CONNECTIONS = int('BENCH_ACCEPT_CONNECTIONS', 64);
/** SSE subscribers on one execution (BENCH_SSE_SUBSCRIBERS, default 1000). */
export const SSE_SUBSCRIBERS = int('BENCH_SSE_SUBSCRIBERS', 1000);
/** Idle SSE clients held open on one execution (BENCH_SSE_IDLE, default 10,000), and for how long (ms). */
export const SSE_IDLE = int('BENCH_SSE_IDLE', 10_000);
export const SSE_IDLE_HOLD_MS = int('BENCH_SSE_IDLE_HOLD_MS', 20_000);
/** Pause between warm-pool samples so the pool refills (BENCH_POOL_PACE_MS, default 1000). */
export const POOL_PACE_MS = int('BENCH_POOL_PACE_MS', 1000);
/** Repetitions of each memory scenario (BENCH_MEMORY_RUNS, default 3). */
export const MEMORY_RUNS = int('BENCH_MEMORY_RUNS', 3);

/** Raw cold p50 and throughput from raw-docker-cold earlier in the same `npm run bench` (set by run-all). */
export const rawColdFromRun = (): { p50Ms: number | null; perSecond: number | null } => {
  const p = Number(process.env.BENCH_RAW_COLD_P50_MS);
  const t = Number(process.env.BENCH_RAW_COLD_PER_S);
  return { p50Ms: Number.isFinite(p) && p > 0 ? p : null, perSecond: Number.isFinite(t) && t > 0 ? t : null };
};
