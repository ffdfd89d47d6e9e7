/**
 * http-session: POST /v1/executions?wait=30 {session_id, python, print(1)} in a default (process-mode) session:
 * each run a new process, in the session's sandbox when the tree has session sandboxes. Reported, no target.
 */
import { createSession, runWait, segments, timelineOf } from './lib/api.ts';
import { DockerEventLog } from './lib/docker-events.ts';
import { N, WARMUP } from './lib/knobs.ts';
import { main } from './lib/main.ts';
import { stackCpuMs, startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, medians, round, summarize } from './lib/stats.ts';

const BENCH = 'http-session';
const TARGET = 'none (reported)';

main(async () => {
  let stack: Stack | null = null;
  const events = new DockerEventLog();
  try {
    stack = await startStack(['standalone'], { SANDGATE_MAX_SESSIONS: '100000' });
    await events.start();
    const session = await createSession(stack);
    const run = () => runWait(stack!, { session_id: session.id, language: 'python', code: 'print(1)' });
    for (let i = 0; i < WARMUP; i++) await run();
    const lat: number[] = [];
    const segs: Record<string, number>[] = [];
    let containersCreated = 0;
    const cpu0 = await stackCpuMs(stack);
    for (let i = 0; i < N; i++) {
      const r = await run();
      lat.push(r.ms);
      if (events.byExecution.get(r.exec.id)?.create) containersCreated++;
      const tl = await timelineOf(stack.redis, stack.prefix, r.exec.id);
      if (tl) segs.push(segments(tl, r.sentAt, r.doneAt, events.byExecution.get(r.exec.id)));
    }
    const cpuMs = (await stackCpuMs(stack)) - cpu0;
    emit({
      bench: BENCH,
      ...summarize(lat),
      sandgate_cpu_ms_per_execution: round(cpuMs / lat.length),
      session_mode: session.mode ?? null,
      runs_with_own_container: containersCreated,
      phases_p50_ms: medians(segs),
      target: TARGET,
      pass: true,
    });
  } catch (e) {
    emitError(BENCH, TARGET, e);
  } finally {
    events.stop();
    await stack?.close();
  }
});
