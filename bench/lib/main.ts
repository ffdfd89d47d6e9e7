/** Running a bench script: figures printed as measured, cleanup that also happens on Ctrl-C or SIGTERM. */

const cleanups = new Set<() => Promise<unknown>>();

/** Registers what must be undone even if the bench is interrupted; answers with the unregister function. */
export function onCleanup(fn: () => Promise<unknown>): () => void {
  cleanups.add(fn);
  return () => cleanups.delete(fn);
}

async function runCleanups(): Promise<void> {
  const pending = [...cleanups].reverse();
  cleanups.clear();
  for (const fn of pending) await fn().catch(() => {});
}

export function main(fn: () => Promise<void>): void {
  // A closed stdout (`| head`) must not crash the bench before it has cleaned up.
  process.stdout.on('error', () => {});
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      process.stderr.write(`${signal}: cleaning up (sandgate processes, Redis keys, temp dirs, containers)\n`);
      void runCleanups().finally(() => process.exit(130));
    });
  }
  fn().then(
    async () => {
      await runCleanups();
      process.exit(0);
    },
    async (err: unknown) => {
      console.error(err instanceof Error ? err.stack : err);
      await runCleanups();
      process.exit(1);
    },
  );
}

let turn: Promise<void> | null = null;

/**
 * Resolves when this bench may start measuring. Run by `npm run bench:ci`, which prepares its benches side by side and
 * lets them measure one at a time (bench/lib/run-bench.ts): the bench says it is ready over the IPC channel and waits
 * to be told to go. Run any other way (no IPC channel), at once. Called just before the first timed sample, after the
 * stack is up and warmed; later calls answer at once.
 */
export function measuring(): Promise<void> {
  turn ??= new Promise<void>((resolve) => {
    if (!process.send) return resolve();
    const onMessage = (m: unknown) => {
      if ((m as { type?: string } | null)?.type !== 'go') return;
      process.off('message', onMessage);
      process.channel?.unref();
      resolve();
    };
    process.on('message', onMessage);
    process.send({ type: 'ready' });
  });
  return turn;
}

/** Time-boxed: a figure that takes longer than `ms` fails with a clear error instead of hanging the run. */
export async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, rej) => {
        timer = setTimeout(() => rej(new Error(`${what} took longer than ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `fn` over `total` items with `concurrency` parallel loops; answers with the wall time (ms). */
export async function fanOut(total: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, total) }, async () => {
      for (let i = next++; i < total; i = next++) await fn(i);
    }),
  );
  return performance.now() - t0;
}
