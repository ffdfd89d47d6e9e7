/** Running a bench script: figures printed as measured, cleanup that also happens on Ctrl-C or SIGTERM. */
import { takeEmitted } from './stats.ts';

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

/** What the runner (bench:ci) said over the IPC channel and no one has read yet; kept from the start. */
const said: string[] = [];
let hear: (() => void) | null = null;
process.on('message', (m: unknown) => {
  const type = (m as { type?: unknown } | null)?.type;
  if (typeof type !== 'string') return;
  said.push(type);
  hear?.();
});
// The channel alone does not keep a bench alive.
process.channel?.unref();

/** The next thing the runner says that is one of `types`. */
async function next(types: string[]): Promise<string> {
  for (;;) {
    const i = said.findIndex((t) => types.includes(t));
    if (i >= 0) return said.splice(i, 1)[0]!;
    await new Promise<void>((resolve) => {
      hear = resolve;
    });
    hear = null;
  }
}

/**
 * Runs `measure` (a bench's timed part, after its stack is up and warm) when the runner lets it, and again as long as
 * the runner asks. Run by `npm run bench:ci` (an IPC channel): the bench says `ready` and waits for `go` — bench:ci
 * prepares its benches side by side and lets them measure one at a time — then answers `measured` with the figures it
 * printed, and measures again on `go` (a retry of a figure over budget, on the same warm stack) until told `finish`.
 * Run any other way (no IPC channel), `measure` runs once, at once.
 */
export async function rounds(measure: () => Promise<void>): Promise<void> {
  if (!process.send) return measure();
  process.send({ type: 'ready' });
  process.channel?.ref();
  while ((await next(['go', 'finish'])) === 'go') {
    await measure();
    process.send({ type: 'measured', figures: takeEmitted() });
  }
  process.channel?.unref();
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
