/**
 * session-resume: a paused process session resumes and runs `print(1)` — POST /v1/executions?wait=30 {session_id,
 * python, print(1)} on a session paused just before (untimed) — against a pooled one-shot `print(1)` of the same
 * tenant (SANDGATE_POOL_SIZE=2) measured in the same run: one of each in turn, with BENCH_POOL_PACE_MS after the
 * pooled run so that its sandbox is back in the pool. Goal: p50 <= 1.5x the pooled one-shot's p50.
 * Beside it: a raw cold container of the same image through the engine API (bench/lib/raw-docker.ts), one per sample
 * in the same rotation (what making a new sandbox costs without sandgate); the run right after the resume in the same
 * session (a warm session run: the part of the resumed run that is not the resume); the worker's own account of the
 * resume (`resumed.duration_ms`: a new sandbox made, files and variables brought back); when the engine created and
 * started the new sandbox; the pause's own time; and the run's phases from sandgate's timestamps.
 * Runs on the quick start's configuration (bench/lib/quick-start.ts): btrfs data directory with per-session quotas,
 * API keys, rate limits and tenant quotas counted.
 */
import { randomBytes } from 'node:crypto';
import { createSession, deleteSession, runWait, segments, timelineOf } from './lib/api.ts';
import { DockerEventLog } from './lib/docker-events.ts';
import { N, POOL_PACE_MS, WARMUP } from './lib/knobs.ts';
import { pause } from './lib/lifecycle-api.ts';
import { main, rounds } from './lib/main.ts';
import { makeWorkspace, rawColdRun } from './lib/raw-docker.ts';
import { quickStart, type QuickStart } from './lib/quick-start.ts';
import { SessionEventLog } from './lib/session-events.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, medians, ratioP25, round, sleep, summarize } from './lib/stats.ts';

const BENCH = 'session-resume';
const TARGET = 'p50 <= 1.5x pooled one-shot p50';
const POOL_SIZE = 2;
const PRINT = { language: 'python', code: 'print(1)' };

async function measure(
  stack: Stack,
  pooledEvents: DockerEventLog,
  sessionEvents: SessionEventLog,
  rawCold: () => Promise<number>,
): Promise<void> {
  const session = await createSession(stack);
  const inSession = { ...PRINT, session_id: session.id };
  await runWait(stack, inSession);
  const resumedLat: number[] = [];
  const warmLat: number[] = [];
  const pooledLat: number[] = [];
  const pauseLat: number[] = [];
  const rawLat: number[] = [];
  const workerResume: number[] = [];
  const segs: Record<string, number>[] = [];
  const engine: Record<string, number>[] = [];
  const oneShotSessions: string[] = [];
  let pooled = 0;
  let notResumed = 0;
  for (let i = 0; i < N; i++) {
    pauseLat.push((await pause(stack, session.id)).ms);
    const r = await runWait(stack, inSession);
    resumedLat.push(r.ms);
    const resumed = r.exec.result?.resumed;
    if (resumed == null) notResumed++;
    else workerResume.push(resumed.duration_ms);
    const tl = await timelineOf(stack.redis, stack.prefix, r.exec.id);
    if (tl) {
      segs.push(segments(tl, r.sentAt, r.doneAt));
      const create = sessionEvents.at(session.id, 'create', r.sentAt - 5);
      const start = sessionEvents.at(session.id, 'start', r.sentAt - 5);
      if (create !== undefined && start !== undefined) {
        engine.push({
          picked_to_engine_create: create - (tl.picked ?? NaN),
          engine_create_to_start: start - create,
          engine_start_to_running_phase: (tl.phases.running ?? NaN) - start,
        });
      }
    }
    warmLat.push((await runWait(stack, inSession)).ms);
    const p = await runWait(stack, PRINT);
    pooledLat.push(p.ms);
    oneShotSessions.push(p.exec.session_id);
    if (!pooledEvents.byExecution.get(p.exec.id)?.create) pooled++;
    await sleep(POOL_PACE_MS);
    rawLat.push(await rawCold());
  }
  for (const id of [...oneShotSessions, session.id]) await deleteSession(stack, id);
  const s = summarize(resumedLat);
  const base = summarize(pooledLat);
  const ratio = s.p50_ms / base.p50_ms;
  emit({
    bench: BENCH,
    ...s,
    pooled_oneshot_p50_ms: base.p50_ms,
    pooled_oneshot_p95_ms: base.p95_ms,
    pooled_oneshot_served_from_pool: pooled,
    raw_cold_p50_ms: summarize(rawLat).p50_ms,
    ratio_to_raw_cold: round(s.p50_ms / summarize(rawLat).p50_ms, 3),
    warm_session_run_p50_ms: summarize(warmLat).p50_ms,
    worker_resume_p50_ms: summarize(workerResume).p50_ms,
    pause_p50_ms: summarize(pauseLat).p50_ms,
    pause_p95_ms: summarize(pauseLat).p95_ms,
    runs_not_resumed: notResumed,
    phases_p50_ms: medians(segs),
    engine_p50_ms: medians(engine),
    pool_size: POOL_SIZE,
    pace_ms: POOL_PACE_MS,
    ...(notResumed > 0 ? { error: `${notResumed} runs on a paused session reported no resume` } : {}),
    ...(pooled === 0 ? { error: 'the pool served no one-shot: the baseline is not a pooled run' } : {}),
    target: TARGET,
    ratio_p25: ratioP25(resumedLat, pooledLat),
    ratio: round(ratio, 3),
    pass: notResumed === 0 && pooled > 0 && ratio <= 1.5,
  });
}

main(async () => {
  const runId = randomBytes(4).toString('hex');
  const ws = await makeWorkspace(runId);
  const rawCold = async () => (await rawColdRun(runId, ws.dir)).totalMs;
  let qs: QuickStart | null = null;
  let stack: Stack | null = null;
  let sessionEvents: SessionEventLog | null = null;
  const pooledEvents = new DockerEventLog();
  try {
    qs = await quickStart();
    stack = await startStack(['standalone'], {
      ...qs.env,
      SANDGATE_POOL_SIZE: String(POOL_SIZE),
      SANDGATE_MAX_SESSIONS: '100000',
    });
    sessionEvents = new SessionEventLog(stack.prefix);
    await sessionEvents.start();
    await pooledEvents.start();
    for (let i = 0; i < WARMUP; i++) {
      const s = await createSession(stack);
      await runWait(stack, { ...PRINT, session_id: s.id });
      await pause(stack, s.id);
      await runWait(stack, { ...PRINT, session_id: s.id });
      await deleteSession(stack, s.id);
      const p = await runWait(stack, PRINT);
      await deleteSession(stack, p.exec.session_id);
      await sleep(POOL_PACE_MS);
      await rawCold();
    }
    await rounds(async () => {
      try {
        await measure(stack!, pooledEvents, sessionEvents!, rawCold);
      } catch (e) {
        emitError(BENCH, TARGET, e);
      }
    });
  } catch (e) {
    emitError(BENCH, TARGET, e);
  } finally {
    pooledEvents.stop();
    sessionEvents?.stop();
    await stack?.close().catch(() => {});
    await qs?.remove();
    await ws.remove();
  }
});
