/**
 * http-oneshot-pool: the http-oneshot-cold request with the warm pool on (SANDGATE_POOL_SIZE=2). Between two
 * samples the bench waits BENCH_POOL_PACE_MS for the pool to refill, then does one raw-docker-cold run (the pool
 * is full and idle by then), so the ratio compares with raw runs interleaved in the same conditions.
 * http-oneshot-pool-throughput: BENCH_THROUGHPUT_N one-shots from BENCH_CONCURRENCY parallel clients (worker
 * concurrency raised to match), executions/s against raw cold runs at the same concurrency measured just before;
 * after BENCH_WARMUP rounds of as many parallel runs, discarded, so that the figure is the steady state of a burst
 * (pool sandboxes recycled for the tenant's next run) rather than its first round (half of it cold).
 * A run counts as served by the pool when Docker reported no container created for that execution.
 */
import { randomBytes } from 'node:crypto';
import { deleteSession, runWait, segments, timelineOf } from './lib/api.ts';
import { DockerEventLog } from './lib/docker-events.ts';
import { CONCURRENCY, N, POOL_PACE_MS, THROUGHPUT_N, WARMUP, rawColdFromRun } from './lib/knobs.ts';
import { fanOut, main } from './lib/main.ts';
import { makeWorkspace, rawColdRun } from './lib/raw-docker.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, medians, round, sleep, summarize } from './lib/stats.ts';

const LATENCY = { bench: 'http-oneshot-pool', target: 'p50 <= 0.4x raw-docker-cold p50' };
const THROUGHPUT = { bench: 'http-oneshot-pool-throughput', target: '>= 3x raw-docker-cold-throughput executions/s' };
const BODY = { language: 'python', code: 'print(1)' };
const POOL_SIZE = 2;
const NOT_POOLED = 'the pool served no run: every execution created its own container';

async function latency(stack: Stack, events: DockerEventLog, raw: () => Promise<number>): Promise<void> {
  for (let i = 0; i < WARMUP; i++) {
    const r = await runWait(stack, BODY);
    await deleteSession(stack, r.exec.session_id);
    await sleep(POOL_PACE_MS);
  }
  const lat: number[] = [];
  const rawLat: number[] = [];
  const segs: Record<string, number>[] = [];
  let pooled = 0;
  for (let i = 0; i < N; i++) {
    await sleep(POOL_PACE_MS);
    rawLat.push(await raw());
    const r = await runWait(stack, BODY);
    lat.push(r.ms);
    const tl = await timelineOf(stack.redis, stack.prefix, r.exec.id);
    if (tl) segs.push(segments(tl, r.sentAt, r.doneAt));
    await deleteSession(stack, r.exec.session_id);
    if (!events.byExecution.get(r.exec.id)?.create) pooled++;
  }
  const s = summarize(lat);
  const rawP50 = summarize(rawLat).p50_ms;
  const fromRun = rawColdFromRun().p50Ms;
  const ratio = s.p50_ms / rawP50;
  emit({
    ...LATENCY,
    ...s,
    raw_p50_ms: rawP50,
    ...(fromRun ? { raw_bench_p50_ms: fromRun } : {}),
    served_from_pool: pooled,
    pool_size: POOL_SIZE,
    pace_ms: POOL_PACE_MS,
    phases_p50_ms: medians(segs),
    ...(pooled === 0 ? { error: NOT_POOLED } : {}),
    ratio,
    pass: pooled > 0 && ratio <= 0.4,
  });
}

async function throughput(stack: Stack, events: DockerEventLog, raw: () => Promise<number>): Promise<void> {
  // Raw cold at the same concurrency, just before (the pool sits full and idle meanwhile).
  const rawWallMs = await fanOut(THROUGHPUT_N, CONCURRENCY, async () => {
    await raw();
  });
  const rawPerSecond = THROUGHPUT_N / (rawWallMs / 1000);
  await fanOut(WARMUP * CONCURRENCY, CONCURRENCY, async () => {
    const r = await runWait(stack, BODY, { wait: 60 });
    await deleteSession(stack, r.exec.session_id);
  });
  await sleep(POOL_PACE_MS * 2);
  const lat: number[] = [];
  const ids: string[] = [];
  events.created = {};
  const wallMs = await fanOut(THROUGHPUT_N, CONCURRENCY, async () => {
    const r = await runWait(stack, BODY, { wait: 60 });
    lat.push(r.ms);
    ids.push(r.exec.id);
    await deleteSession(stack, r.exec.session_id);
  });
  const perSecond = THROUGHPUT_N / (wallMs / 1000);
  const pooled = ids.filter((id) => !events.byExecution.get(id)?.create).length;
  const created = { ...events.created };
  const creates = Object.values(created).reduce((a, b) => a + b, 0);
  const fromRun = rawColdFromRun().perSecond;
  const ratio = perSecond / rawPerSecond;
  emit({
    ...THROUGHPUT,
    ...summarize(lat),
    executions_per_s: round(perSecond),
    raw_executions_per_s: round(rawPerSecond),
    ...(fromRun ? { raw_bench_executions_per_s: fromRun } : {}),
    concurrency: CONCURRENCY,
    worker_concurrency: CONCURRENCY,
    pool_size: POOL_SIZE,
    served_from_pool: pooled,
    wall_ms: round(wallMs),
    // A cold run creates its container, a single-use pool sandbox is replaced; a recycled one costs the engine nothing.
    warmup_runs: WARMUP * CONCURRENCY,
    containers_created: created,
    engine_containers_created_per_s: round(creates / (wallMs / 1000)),
    ...(pooled === 0 ? { error: NOT_POOLED } : {}),
    ratio,
    pass: pooled > 0 && ratio >= 3,
  });
}

main(async () => {
  const runId = randomBytes(4).toString('hex');
  const ws = await makeWorkspace(runId);
  const raw = async () => (await rawColdRun(runId, ws.dir)).totalMs;
  let stack: Stack | null = null;
  let events: DockerEventLog | null = null;
  try {
    stack = await startStack(['standalone'], {
      SANDGATE_POOL_SIZE: String(POOL_SIZE),
      SANDGATE_MAX_SESSIONS: '100000',
      SANDGATE_WORKER_CONCURRENCY: String(CONCURRENCY),
    });
    events = new DockerEventLog(stack.prefix);
    await events.start();
    for (let i = 0; i < WARMUP; i++) await raw();
    try {
      await latency(stack, events, raw);
    } catch (e) {
      emitError(LATENCY.bench, LATENCY.target, e);
    }
    try {
      await throughput(stack, events, raw);
    } catch (e) {
      emitError(THROUGHPUT.bench, THROUGHPUT.target, e);
    }
  } catch (e) {
    emitError(LATENCY.bench, LATENCY.target, e);
    emitError(THROUGHPUT.bench, THROUGHPUT.target, e);
  } finally {
    events?.stop();
    await stack?.close();
    await ws.remove();
  }
});
