/**
 * session-resume-state: a paused stateful session holding a 50 MiB pandas DataFrame (655,360 × 10 float64) resumes
 * with it. Each sample pauses the session (POST …/pause: the interpreter's variables saved with dill, its sandbox
 * removed; timed as `pause_*`), then brings it back (POST …/resume: a new sandbox, the variables loaded into its
 * interpreter; the figure), then checks with a run that `df.shape` is back (untimed).
 * The DataFrame's own unpickle time is measured inside the session's sandbox, on the bytes `dill.dumps(df)` makes (what
 * the pause saves for it): in a fresh `python3` process (`unpickle_fresh_*`: `import dill` and `dill.load` of a file,
 * which imports pandas on the way, as a resumed interpreter must) and in the live interpreter, where pandas is already
 * imported (`unpickle_warm_*`), and what pickling it takes there (`pickle_in_sandbox`, `dill.dumps(df)`).
 * Goal: resume p50 <= 300 ms + the fresh unpickle's p50. Beside it, in the same rotation,
 * the pause and the resume of a stateful session holding one small variable (`small_state_*`): what the 50 MiB add.
 * Runs on the quick start's configuration (bench/lib/quick-start.ts); SANDGATE_IMAGE must have dill and pandas.
 */
import { createSession, deleteSession, runWait } from './lib/api.ts';
import { N, WARMUP } from './lib/knobs.ts';
import { pause, resume } from './lib/lifecycle-api.ts';
import { main, rounds } from './lib/main.ts';
import { quickStart, type QuickStart } from './lib/quick-start.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, round, summarize } from './lib/stats.ts';

const BENCH = 'session-resume-state';
const TARGET = 'p50 <= 300 ms + the DataFrame unpickle p50';
const ROWS = 655_360;
const SHAPE = `(${ROWS}, 10)`;
const MAKE_DF = `import numpy as np, pandas as pd
df = pd.DataFrame(np.random.default_rng(1).random((${ROWS}, 10)))
print(df.memory_usage(index=False).sum())`;
/**
 * The DataFrame pickled as the pause pickles it, then unpickled: in a new python process from a file in the session's
 * directory (removed after), and in this interpreter. Prints one JSON line; peak memory stays near 4x the frame.
 */
const UNPICKLE = `import dill as _d, json as _j, os as _o, subprocess as _sp, sys as _s, time as _t
_t0 = _t.perf_counter()
_b = _d.dumps(df)
_save = _t.perf_counter() - _t0
_f = '/mnt/data/.bench-df.dill'
with open(_f, 'wb') as _h:
    _h.write(_b)
_n = len(_b)
del _b
_code = ("import time; t0 = time.perf_counter(); import dill; t1 = time.perf_counter(); "
         "d = dill.load(open(%r, 'rb')); t2 = time.perf_counter(); "
         "assert d.shape == ${SHAPE}; "
         "print(t1 - t0, t2 - t1)" % _f)
_t0 = _t.perf_counter()
_out = _sp.run([_s.executable, '-c', _code], capture_output=True, text=True, check=True).stdout.split()
_proc = _t.perf_counter() - _t0
with open(_f, 'rb') as _h:
    _b = _h.read()
_o.remove(_f)
_t0 = _t.perf_counter()
_x = _d.loads(_b)
_warm = _t.perf_counter() - _t0
del _b, _x
print(_j.dumps({"bytes": _n, "dumps_s": _save, "fresh_import_dill_s": float(_out[0]), "fresh_load_s": float(_out[1]), "fresh_process_s": _proc, "warm_load_s": _warm}))`;

async function measure(stack: Stack): Promise<void> {
  const session = await createSession(stack, { mode: 'stateful', undo: 'off' });
  const run = (code: string, expectStdout: string | null = null) =>
    runWait(stack, { session_id: session.id, language: 'python', code }, { wait: 120, expectStdout });
  const made = await run(MAKE_DF);
  const dfBytes = Number(made.exec.result.stdout);
  const unpickleFresh: number[] = [];
  const unpickleWarm: number[] = [];
  const dumpModule: number[] = [];
  const importDill: number[] = [];
  const freshProcess: number[] = [];
  let pickleBytes = 0;
  const samples = Math.max(3, Math.ceil(N / 4));
  for (let i = 0; i < samples; i++) {
    const r = await run(UNPICKLE);
    const m = JSON.parse(String(r.exec.result.stdout).trim()) as Record<string, number>;
    pickleBytes = m.bytes!;
    unpickleFresh.push(m.fresh_load_s! * 1000);
    importDill.push(m.fresh_import_dill_s! * 1000);
    freshProcess.push(m.fresh_process_s! * 1000);
    unpickleWarm.push(m.warm_load_s! * 1000);
    dumpModule.push(m.dumps_s! * 1000);
  }
  // The same steps on a stateful session holding one small variable: what a resume and a pause cost without 50 MiB.
  const small = await createSession(stack, { mode: 'stateful', undo: 'off' });
  await runWait(stack, { session_id: small.id, language: 'python', code: 'x = 41' }, { expectStdout: null });
  const smallPause: number[] = [];
  const smallResume: number[] = [];
  const pauseMs: number[] = [];
  const resumeMs: number[] = [];
  const workerResumeMs: number[] = [];
  let savedBytes = 0;
  let wrong = 0;
  for (let i = 0; i < samples; i++) {
    const p = await pause(stack, session.id);
    pauseMs.push(p.ms);
    savedBytes = p.json.variables?.size_bytes ?? 0;
    const r = await resume(stack, session.id);
    resumeMs.push(r.ms);
    workerResumeMs.push(r.json.resumed.duration_ms);
    if (r.json.resumed.variables?.error) throw new Error(`resume: ${r.json.resumed.variables.error}`);
    const check = await run('df.shape');
    if (check.exec.result.value !== SHAPE) wrong++;
    smallPause.push((await pause(stack, small.id)).ms);
    smallResume.push((await resume(stack, small.id)).ms);
  }
  await deleteSession(stack, session.id);
  await deleteSession(stack, small.id);
  const s = summarize(resumeMs);
  const fresh = summarize(unpickleFresh);
  const goal = 300 + fresh.p50_ms;
  emit({
    bench: BENCH,
    ...s,
    worker_resume_p50_ms: summarize(workerResumeMs).p50_ms,
    dataframe_bytes: dfBytes,
    pickle_bytes: pickleBytes,
    saved_variables_bytes: savedBytes,
    unpickle_fresh_p50_ms: fresh.p50_ms,
    unpickle_fresh_max_ms: fresh.max_ms,
    unpickle_fresh_import_dill_p50_ms: summarize(importDill).p50_ms,
    unpickle_fresh_process_p50_ms: summarize(freshProcess).p50_ms,
    unpickle_warm_p50_ms: summarize(unpickleWarm).p50_ms,
    small_state_resume_p50_ms: summarize(smallResume).p50_ms,
    small_state_pause_p50_ms: summarize(smallPause).p50_ms,
    pickle_in_sandbox_p50_ms: summarize(dumpModule).p50_ms,
    pause_p50_ms: summarize(pauseMs).p50_ms,
    pause_p95_ms: summarize(pauseMs).p95_ms,
    pause_max_ms: summarize(pauseMs).max_ms,
    resume_beyond_unpickle_p50_ms: round(s.p50_ms - fresh.p50_ms),
    goal_ms: round(goal),
    ...(wrong > 0 ? { error: `${wrong} resumes did not bring df back (df.shape)` } : {}),
    target: TARGET,
    ratio: s.p50_ms / goal,
    pass: wrong === 0 && s.p50_ms <= goal,
  });
}

main(async () => {
  let qs: QuickStart | null = null;
  let stack: Stack | null = null;
  try {
    qs = await quickStart();
    stack = await startStack(['standalone'], { ...qs.env, SANDGATE_MAX_SESSIONS: '100000' });
    for (let i = 0; i < WARMUP; i++) {
      const s = await createSession(stack, { mode: 'stateful', undo: 'off' });
      await runWait(
        stack,
        { session_id: s.id, language: 'python', code: 'import pandas; x = 1' },
        { expectStdout: null },
      );
      await pause(stack, s.id);
      await resume(stack, s.id);
      await deleteSession(stack, s.id);
    }
    await rounds(async () => {
      try {
        await measure(stack!);
      } catch (e) {
        emitError(BENCH, TARGET, e);
      }
    });
  } catch (e) {
    emitError(BENCH, TARGET, e);
  } finally {
    await stack?.close().catch(() => {});
    await qs?.remove();
  }
});
