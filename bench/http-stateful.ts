/**
 * http-stateful: a session with {"mode":"stateful"} (a live Python interpreter); after `x = 41`,
 * POST /v1/executions?wait=30 {session_id, python, "x + 1"} over and over (each must answer value "42"); end-to-end
 * p50 against 15 ms. Samples go in blocks of 10 alternating with as many raw-docker-exec runs (`python3 -c print(1)`
 * exec'd into a running container of the same image and flags: bench/lib/alternate.ts), so the ratio to raw exec
 * compares runs made in the same minutes. CPU per execution is the sandgate process's over its blocks, also
 * normalized to the machine's speed, probed once per sample (bench/lib/speed.ts).
 */
import { randomBytes } from 'node:crypto';
import { createSession, runWait, segments, timelineOf } from './lib/api.ts';
import { alternate } from './lib/alternate.ts';
import { N, WARMUP } from './lib/knobs.ts';
import { main, rounds } from './lib/main.ts';
import { makeWorkspace, rawExec, startIdleContainer } from './lib/raw-docker.ts';
import { SpeedProbe } from './lib/speed.ts';
import { stackCpuMs, startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, medians, ratioP25, round, summarize } from './lib/stats.ts';

const BENCH = 'http-stateful';
const TARGET = 'p50 <= 15 ms';

main(async () => {
  const runId = randomBytes(4).toString('hex');
  const ws = await makeWorkspace(runId);
  let stack: Stack | null = null;
  try {
    stack = await startStack(['standalone'], { SANDGATE_MAX_SESSIONS: '100000' });
    const container = await startIdleContainer(runId, ws.dir);
    const session = await createSession(stack, { mode: 'stateful' });
    if (session.mode !== 'stateful')
      throw new Error(`POST /v1/sessions {"mode":"stateful"} answered mode ${JSON.stringify(session.mode)}`);
    const run = () =>
      runWait(stack!, { session_id: session.id, language: 'python', code: 'x + 1' }, { expectStdout: null });
    await runWait(stack, { session_id: session.id, language: 'python', code: 'x = 41' }, { expectStdout: null });
    const probe = await run();
    if (probe.exec.result.value !== '42') {
      throw new Error(
        `stateful mode not in effect: "x + 1" after "x = 41" gave value ${JSON.stringify(probe.exec.result.value)}, stdout ${JSON.stringify(probe.exec.result.stdout)}`,
      );
    }
    for (let i = 0; i < WARMUP * 3; i++) {
      await run();
      await rawExec(container);
    }
    await rounds(async () => {
      const lat: number[] = [];
      const raw: number[] = [];
      const segs: Record<string, number>[] = [];
      const speed = new SpeedProbe();
      let wrong = 0;
      const { cpuMs, cpuMsPerRunByBlock } = await alternate({
        n: N * 3,
        block: 10,
        sandgate: async () => {
          const r = await run();
          lat.push(r.ms);
          if (r.exec.result.value !== '42') wrong++;
          speed.probe();
          const tl = await timelineOf(stack!.redis, stack!.prefix, r.exec.id);
          if (tl) segs.push(segments(tl, r.sentAt, r.doneAt));
        },
        baseline: async () => {
          raw.push(await rawExec(container));
        },
        cpuMs: () => stackCpuMs(stack!),
      });
      const s = summarize(lat);
      const rawP50 = summarize(raw).p50_ms;
      emit({
        bench: BENCH,
        ...s,
        raw_p50_ms: rawP50,
        raw_baseline: 'raw-docker-exec',
        sandgate_cpu_ms_per_execution: round(cpuMs / lat.length),
        sandgate_cpu_ms_per_execution_normalized: speed.normalize(cpuMs / lat.length),
        ...speed.report(),
        sandgate_cpu_ms_per_execution_by_block: cpuMsPerRunByBlock,
        api_keys: Boolean(stack!.env.SANDGATE_API_KEYS),
        phases_p50_ms: medians(segs),
        ...(wrong ? { error: `${wrong} runs did not answer value "42"` } : {}),
        target: TARGET,
        ratio_p25: ratioP25(lat, raw),
        ratio: s.p50_ms / rawP50,
        pass: wrong === 0 && s.p50_ms <= 15,
      });
    });
  } catch (e) {
    emitError(BENCH, TARGET, e);
  } finally {
    await stack?.close();
    await ws.remove();
  }
});
