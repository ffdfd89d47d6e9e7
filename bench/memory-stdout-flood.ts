/**
 * memory-stdout-flood: gateway and worker as separate processes (npm run start:gateway / start:worker);
 * a Python run writes 100 MiB to stdout (sandgate keeps the first 100 KB and drops the rest). The RSS of
 * each process must not grow more than 50 MB. Repeated BENCH_MEMORY_RUNS times; the timing fields are the runs.
 */
import { runWait } from './lib/api.ts';
import { MEMORY_RUNS } from './lib/knobs.ts';
import { main } from './lib/main.ts';
import { MEMORY_TARGET, emitMemory, measureMemory } from './lib/memory.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { emitError } from './lib/stats.ts';

const BENCH = 'memory-stdout-flood';
const MIB = 100;
const CODE = `import sys\nb = ('x' * 1023 + '\\n').encode()\nw = sys.stdout.buffer.write\nfor _ in range(${MIB * 1024}):\n    w(b)\n`;

main(async () => {
  let stack: Stack | null = null;
  try {
    // Pool off: a cold sandbox's output crosses the worker whole (a warm sandbox's agent caps it inside the sandbox).
    stack = await startStack(['gateway', 'worker'], { SANDGATE_MAX_SESSIONS: '100000', SANDGATE_POOL_SIZE: '0' });
    // Warm: the code paths of a run are loaded before the baseline is taken.
    await runWait(stack, { language: 'python', code: 'print(1)' });
    let truncated = true;
    let stdoutKept = 0;
    const r = await measureMemory(stack, MEMORY_RUNS, async () => {
      const run = await runWait(
        stack!,
        { language: 'python', code: CODE, timeout_ms: 60_000 },
        { wait: 90, expectStdout: null },
      );
      truncated &&= run.exec.result.stdout_truncated === true;
      stdoutKept = run.exec.result.stdout.length;
    });
    const stops = await stack.close();
    stack = null;
    emitMemory(
      BENCH,
      MEMORY_TARGET,
      r,
      { stdout_mib_per_run: MIB, stdout_truncated: truncated, stdout_kept_bytes: stdoutKept, pool_size: 0 },
      stops,
    );
  } catch (e) {
    emitError(BENCH, MEMORY_TARGET, e);
  } finally {
    await stack?.close();
  }
});
