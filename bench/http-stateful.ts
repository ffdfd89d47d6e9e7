/**
 * http-stateful: a session with {"mode":"stateful"} (a live Python interpreter), then
 * POST /v1/executions?wait=30 {session_id, python, "1+1"} over and over; end-to-end p50 against 15 ms.
 * Before measuring it checks that state really persists (x = 41, then x + 1 → value "42").
 */
import { createSession, runWait, segments, timelineOf } from './lib/api.ts';
import { N, WARMUP } from './lib/knobs.ts';
import { main } from './lib/main.ts';
import { stackCpuMs, startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, medians, round, summarize } from './lib/stats.ts';

const BENCH = 'http-stateful';
const TARGET = 'p50 <= 15 ms';

main(async () => {
  let stack: Stack | null = null;
  try {
    stack = await startStack(['standalone'], { SANDGATE_MAX_SESSIONS: '100000' });
    const session = await createSession(stack, { mode: 'stateful' });
    if (session.mode !== 'stateful')
      throw new Error(`POST /v1/sessions {"mode":"stateful"} answered mode ${JSON.stringify(session.mode)}`);
    const run = (code: string) =>
      runWait(stack!, { session_id: session.id, language: 'python', code }, { expectStdout: null });
    await run('x = 41');
    const probe = await run('x + 1');
    if (probe.exec.result.value !== '42') {
      throw new Error(
        `stateful mode not in effect: "x + 1" after "x = 41" gave value ${JSON.stringify(probe.exec.result.value)}, stdout ${JSON.stringify(probe.exec.result.stdout)}`,
      );
    }
    for (let i = 0; i < WARMUP * 3; i++) await run('1+1');
    const lat: number[] = [];
    const segs: Record<string, number>[] = [];
    let wrong = 0;
    const cpu0 = await stackCpuMs(stack);
    for (let i = 0; i < N * 3; i++) {
      const r = await run('1+1');
      lat.push(r.ms);
      if (r.exec.result.value !== '2') wrong++;
      const tl = await timelineOf(stack.redis, stack.prefix, r.exec.id);
      if (tl) segs.push(segments(tl, r.sentAt, r.doneAt));
    }
    const cpuMs = (await stackCpuMs(stack)) - cpu0;
    const s = summarize(lat);
    emit({
      bench: BENCH,
      ...s,
      sandgate_cpu_ms_per_execution: round(cpuMs / lat.length),
      phases_p50_ms: medians(segs),
      ...(wrong ? { error: `${wrong} runs did not answer value "2"` } : {}),
      target: TARGET,
      pass: wrong === 0 && s.p50_ms <= 15,
    });
  } catch (e) {
    emitError(BENCH, TARGET, e);
  } finally {
    await stack?.close();
  }
});
