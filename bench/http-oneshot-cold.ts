/**
 * http-oneshot-cold: POST /v1/executions?wait=30 {python, print(1)} through a real sandgate (`npm start`'s
 * standalone process: gateway + worker + Docker backend) with the warm pool off, so every run gets a fresh
 * container. Each HTTP sample is interleaved with a raw-docker-cold sample, so the ratio compares the two
 * under the same engine conditions; the phase breakdown comes from sandgate's own timestamps and Docker's events.
 * CPU per execution is the sandgate process's during its own samples, also normalized to the reference speed
 * (bench/lib/speed.ts, probed once per sample).
 */
import { randomBytes } from 'node:crypto';
import { deleteSession, runWait, segments, timelineOf } from './lib/api.ts';
import { DockerEventLog } from './lib/docker-events.ts';
import { N, WARMUP, moreSamples, rawColdFromRun } from './lib/knobs.ts';
import { main, rounds } from './lib/main.ts';
import { cpuMsOfAll, enginePids } from './lib/proc.ts';
import { makeWorkspace, rawColdRun } from './lib/raw-docker.ts';
import { SpeedProbe } from './lib/speed.ts';
import { stackCpuMs, startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, medians, ratioP25, round, summarize } from './lib/stats.ts';

const BENCH = 'http-oneshot-cold';
const TARGET = 'p50 <= 1.15x raw-docker-cold p50';
const BODY = { language: 'python', code: 'print(1)' };

/** One timed one-shot with the run's phase segments; `cleanup` deletes its session (untimed, left to the caller). */
async function sample(stack: Stack, events: DockerEventLog | null) {
  const r = await runWait(stack, BODY);
  const tl = await timelineOf(stack.redis, stack.prefix, r.exec.id);
  const engine = events?.byExecution.get(r.exec.id);
  return {
    ms: r.ms,
    seg: tl ? segments(tl, r.sentAt, r.doneAt, engine) : {},
    cleanup: () => deleteSession(stack, r.exec.session_id),
  };
}

main(async () => {
  const runId = randomBytes(4).toString('hex');
  const ws = await makeWorkspace(runId);
  let stack: Stack | null = null;
  const events = new DockerEventLog();
  try {
    stack = await startStack(['standalone'], { SANDGATE_POOL_SIZE: '0', SANDGATE_MAX_SESSIONS: '100000' });
    await events.start();
    for (let i = 0; i < WARMUP; i++) {
      await (await sample(stack, null)).cleanup();
      await rawColdRun(runId, ws.dir);
    }
    await rounds(async () => {
      const http: number[] = [];
      const raw: number[] = [];
      const rawSteps: Record<string, number>[] = [];
      const segs: Record<string, number>[] = [];
      // CPU per run: the raw client (this process) and sandgate (its process), and the engine's daemons for each.
      const engine = await enginePids();
      const cpu = { rawClient: 0, rawEngine: 0, sandgate: 0, sandgateEngine: 0 };
      const speed = new SpeedProbe();
      const t0 = performance.now();
      for (let i = 0; moreSamples(i, N, t0); i++) {
        const e0 = await cpuMsOfAll(engine);
        const c0 = process.cpuUsage();
        const r = await rawColdRun(runId, ws.dir);
        const c = process.cpuUsage(c0);
        const e1 = await cpuMsOfAll(engine);
        cpu.rawClient += (c.user + c.system) / 1000;
        cpu.rawEngine += e1 - e0;
        raw.push(r.totalMs);
        rawSteps.push(r.steps);
        const s0 = await stackCpuMs(stack!);
        const s = await sample(stack!, events);
        cpu.sandgate += (await stackCpuMs(stack!)) - s0;
        cpu.sandgateEngine += (await cpuMsOfAll(engine)) - e1;
        speed.probe();
        await s.cleanup();
        http.push(s.ms);
        segs.push(s.seg);
      }
      const h = summarize(http);
      const r = summarize(raw);
      const ratio = h.p50_ms / r.p50_ms;
      const fromRun = rawColdFromRun().p50Ms;
      const n = http.length;
      emit({
        bench: BENCH,
        ...h,
        raw_p50_ms: r.p50_ms,
        overhead_p50_ms: round(h.p50_ms - r.p50_ms),
        ...(fromRun ? { raw_bench_p50_ms: fromRun, ratio_vs_raw_bench: round(h.p50_ms / fromRun, 3) } : {}),
        phases_p50_ms: medians(segs),
        raw_steps_p50_ms: medians(rawSteps),
        sandgate_cpu_ms_per_execution: round(cpu.sandgate / n),
        sandgate_cpu_ms_per_execution_normalized: speed.normalize(cpu.sandgate / n),
        ...speed.report(),
        cpu_ms_per_run: {
          raw_client: round(cpu.rawClient / n),
          raw_engine: round(cpu.rawEngine / n),
          sandgate: round(cpu.sandgate / n),
          sandgate_engine: round(cpu.sandgateEngine / n),
        },
        api_keys: Boolean(stack!.env.SANDGATE_API_KEYS),
        pool_size: 0,
        ratio_p25: ratioP25(http, raw),
        target: TARGET,
        ratio,
        pass: ratio <= 1.15,
      });
    });
  } catch (e) {
    emitError(BENCH, TARGET, e);
  } finally {
    events.stop();
    await stack?.close();
    await ws.remove();
  }
});
