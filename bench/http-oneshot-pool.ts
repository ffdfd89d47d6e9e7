/**
 * http-oneshot-pool: the http-oneshot-cold request with the warm pool on (SANDGATE_POOL_SIZE=2). Between two
 * samples the bench waits BENCH_POOL_PACE_MS for the pool to refill, then does one raw-docker-cold run (the pool
 * is full and idle by then), so the ratio compares with raw runs interleaved in the same conditions; with
 * BENCH_POOL_BASELINE=exec the interleaved raw run is a raw-docker-exec into a running container instead (the floor
 * of a warm sandbox that starts a process per run), and the samples go in blocks of 5 back to back alternating with
 * as many raw execs, each followed by the pause (bench/lib/alternate.ts). CPU per execution is the sandgate process's
 * over its blocks (sessions are deleted after them), also normalized to the machine's speed, probed once per sample
 * (bench/lib/speed.ts).
 * http-oneshot-pool-throughput: BENCH_THROUGHPUT_N one-shots from BENCH_CONCURRENCY parallel clients (worker
 * concurrency raised to match), executions/s against raw cold runs at the same concurrency measured just before;
 * after BENCH_WARMUP rounds of as many parallel runs, discarded, so that the figure is the steady state of a burst
 * (pool sandboxes recycled for the tenant's next run) rather than its first round (half of it cold).
 * A run counts as served by the pool when Docker reported no container created for that execution.
 */
import { randomBytes } from 'node:crypto';
import { deleteSession, runWait, segments, timelineOf } from './lib/api.ts';
import { DockerEventLog } from './lib/docker-events.ts';
import {
  CONCURRENCY,
  N,
  POOL_BASELINE,
  POOL_PACE_MS,
  THROUGHPUT_N,
  WARMUP,
  rawColdFromRun,
  wanted,
} from './lib/knobs.ts';
import { alternate } from './lib/alternate.ts';
import { fanOut, main, rounds } from './lib/main.ts';
import { makeWorkspace, rawColdRun, rawExec, startIdleContainer } from './lib/raw-docker.ts';
import { SpeedProbe } from './lib/speed.ts';
import { stackCpuMs, startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, medians, ratioP25, round, sleep, summarize } from './lib/stats.ts';

const LATENCY = {
  bench: 'http-oneshot-pool',
  target: POOL_BASELINE === 'exec' ? 'reported (ratio to raw-docker-exec)' : 'p50 <= 0.4x raw-docker-cold p50',
};
const THROUGHPUT = { bench: 'http-oneshot-pool-throughput', target: '>= 3x raw-docker-cold-throughput executions/s' };
const BODY = { language: 'python', code: 'print(1)' };
const POOL_SIZE = 2;
const NOT_POOLED = 'the pool served no run: every execution created its own container';

async function latency(stack: Stack, events: DockerEventLog, raw: () => Promise<number>): Promise<void> {
  const lat: number[] = [];
  const rawLat: number[] = [];
  const segs: Record<string, number>[] = [];
  const sessions: string[] = [];
  const speed = new SpeedProbe();
  let pooled = 0;
  await sleep(POOL_PACE_MS);
  const { cpuMs, cpuMsPerRunByBlock } = await alternate({
    n: N,
    // A raw cold run takes as long as a few pooled ones: one of each, as this bench has always measured it.
    block: POOL_BASELINE === 'exec' ? 5 : 1,
    sandgate: async () => {
      const r = await runWait(stack, BODY);
      lat.push(r.ms);
      speed.probe();
      const tl = await timelineOf(stack.redis, stack.prefix, r.exec.id);
      if (tl) segs.push(segments(tl, r.sentAt, r.doneAt));
      sessions.push(r.exec.session_id);
      if (!events.byExecution.get(r.exec.id)?.create) pooled++;
    },
    baseline: async () => {
      rawLat.push(await raw());
      await sleep(POOL_PACE_MS);
    },
    cpuMs: () => stackCpuMs(stack),
  });
  for (const id of sessions) await deleteSession(stack, id);
  const s = summarize(lat);
  const rawP50 = summarize(rawLat).p50_ms;
  const fromRun = POOL_BASELINE === 'cold' ? rawColdFromRun().p50Ms : null;
  const ratio = s.p50_ms / rawP50;
  emit({
    ...LATENCY,
    ...s,
    raw_p50_ms: rawP50,
    raw_baseline: `raw-docker-${POOL_BASELINE}`,
    ...(fromRun ? { raw_bench_p50_ms: fromRun } : {}),
    sandgate_cpu_ms_per_execution: round(cpuMs / lat.length),
    sandgate_cpu_ms_per_execution_normalized: speed.normalize(cpuMs / lat.length),
    ...speed.report(),
    sandgate_cpu_ms_per_execution_by_block: cpuMsPerRunByBlock,
    api_keys: Boolean(stack.env.SANDGATE_API_KEYS),
    served_from_pool: pooled,
    pool_size: POOL_SIZE,
    pace_ms: POOL_PACE_MS,
    phases_p50_ms: medians(segs),
    ...(pooled === 0 ? { error: NOT_POOLED } : {}),
    ratio_p25: ratioP25(lat, rawLat),
    ratio,
    pass: pooled > 0 && (POOL_BASELINE === 'exec' || ratio <= 0.4),
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
  const rawCold = async () => (await rawColdRun(runId, ws.dir)).totalMs;
  let stack: Stack | null = null;
  let events: DockerEventLog | null = null;
  try {
    const container = POOL_BASELINE === 'exec' ? await startIdleContainer(runId, ws.dir) : null;
    const rawLatency = container ? () => rawExec(container) : rawCold;
    stack = await startStack(['standalone'], {
      SANDGATE_POOL_SIZE: String(POOL_SIZE),
      SANDGATE_MAX_SESSIONS: '100000',
      SANDGATE_WORKER_CONCURRENCY: String(CONCURRENCY),
    });
    events = new DockerEventLog(stack.prefix);
    await events.start();
    for (let i = 0; i < WARMUP; i++) {
      const r = await runWait(stack, BODY);
      await deleteSession(stack, r.exec.session_id);
      await rawLatency();
      await sleep(POOL_PACE_MS);
    }
    await rounds(async () => {
      if (wanted(LATENCY.bench)) {
        try {
          await latency(stack!, events!, rawLatency);
        } catch (e) {
          emitError(LATENCY.bench, LATENCY.target, e);
        }
      }
      if (wanted(THROUGHPUT.bench)) {
        try {
          await throughput(stack!, events!, rawCold);
        } catch (e) {
          emitError(THROUGHPUT.bench, THROUGHPUT.target, e);
        }
      }
    });
  } catch (e) {
    for (const f of [LATENCY, THROUGHPUT]) if (wanted(f.bench)) emitError(f.bench, f.target, e);
  } finally {
    events?.stop();
    await stack?.close();
    await ws.remove();
  }
});
