/**
 * raw-docker-cold: the baseline every cold figure is compared with — `python3 -c print(1)` in a fresh container
 * with sandgate's sandbox flags, straight through dockerode: create, attach, wait(next-exit), start, exit, remove.
 * raw-docker-cold-throughput: the same with BENCH_CONCURRENCY parallel loops, executions/s.
 */
import { randomBytes } from 'node:crypto';
import { CONCURRENCY, N, THROUGHPUT_N, WARMUP } from './lib/knobs.ts';
import { fanOut, main } from './lib/main.ts';
import { cpuMsOfAll, enginePids } from './lib/proc.ts';
import { makeWorkspace, rawColdRun } from './lib/raw-docker.ts';
import { emit, emitError, medians, round, summarize } from './lib/stats.ts';

main(async () => {
  const runId = randomBytes(4).toString('hex');
  const ws = await makeWorkspace(runId);
  try {
    try {
      for (let i = 0; i < WARMUP; i++) await rawColdRun(runId, ws.dir);
      const runs = [];
      const engine = await enginePids();
      const engine0 = await cpuMsOfAll(engine);
      const client0 = process.cpuUsage();
      for (let i = 0; i < N; i++) runs.push(await rawColdRun(runId, ws.dir));
      const client = process.cpuUsage(client0);
      const engineMs = (await cpuMsOfAll(engine)) - engine0;
      emit({
        bench: 'raw-docker-cold',
        ...summarize(runs.map((r) => r.totalMs)),
        steps_p50_ms: medians(runs.map((r) => r.steps)),
        client_cpu_ms_per_run: round((client.user + client.system) / 1000 / N),
        engine_cpu_ms_per_run: round(engineMs / N),
        target: 'baseline (denominator of the cold and pool ratios)',
        pass: true,
      });
    } catch (e) {
      emitError('raw-docker-cold', 'baseline (denominator of the cold and pool ratios)', e);
    }
    try {
      const latencies: number[] = [];
      const wallMs = await fanOut(THROUGHPUT_N, CONCURRENCY, async () => {
        latencies.push((await rawColdRun(runId, ws.dir)).totalMs);
      });
      emit({
        bench: 'raw-docker-cold-throughput',
        ...summarize(latencies),
        executions_per_s: round(THROUGHPUT_N / (wallMs / 1000)),
        concurrency: CONCURRENCY,
        wall_ms: round(wallMs),
        target: 'baseline (denominator of the pool throughput ratio)',
        pass: true,
      });
    } catch (e) {
      emitError('raw-docker-cold-throughput', 'baseline (denominator of the pool throughput ratio)', e);
    }
  } finally {
    await ws.remove();
  }
});
