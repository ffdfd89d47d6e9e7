/**
 * Running one bench script as a child process of its own (so one's memory or sockets never colour the next), its
 * JSON lines passed through to stdout and collected; shared by `npm run bench` (run-all.ts) and `npm run bench:ci`.
 * A bench says over the IPC channel when it is ready to measure (`rounds()` in bench/lib/main.ts) and waits to be
 * told to go: bench:ci starts several at once, so their slow start-ups overlap, and lets them measure one at a time.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './stack.ts';

export type Fig = Record<string, any>;

/** How long a bench may take to be ready to measure, to measure once, and to end once told to. */
const PREPARE_TIMEOUT_MS = 300_000;
const MEASURE_TIMEOUT_MS = 300_000;
const FINISH_TIMEOUT_MS = 120_000;
/** The benches running now (each its own process group): Ctrl-C or SIGTERM here is passed on, so they clean up. */
const running = new Set<number>();
let interrupted = false;

/** Passes SIGINT and SIGTERM on to the benches running now; `isInterrupted()` then answers true. */
export function forwardSignals(): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      interrupted = true;
      if (running.size === 0) process.exit(130);
      for (const pid of running) {
        try {
          process.kill(-pid, signal);
        } catch {
          /* gone */
        }
      }
    });
  }
}

export const isInterrupted = (): boolean => interrupted;

export interface BenchRun {
  /** Resolves when the bench is ready to measure, or has ended without getting there. */
  ready: Promise<void>;
  /**
   * Lets it measure (once more, after the first time: `rounds()` in bench/lib/main.ts); resolves with the figures of
   * that round, or null when the bench ended instead (its figures are then in `finish()`'s).
   */
  measure(): Promise<Fig[] | null>;
  /** Tells it to end (it stops its stack and removes what it made); resolves once it has exited. */
  finish(): Promise<{ figures: Fig[]; exit: string }>;
  /** Whether it has exited. */
  readonly ended: boolean;
  /** When (Date.now()) it said it was ready to measure, if it has. */
  readonly readyAt: number | null;
}

/** SIGTERM to the bench's process group; SIGKILL if it has not ended a minute later (its cleanup hung). */
function stop(pid: number): void {
  try {
    process.kill(-pid, 'SIGTERM');
  } catch {
    /* gone */
  }
  setTimeout(() => {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }, 60_000).unref();
}

/**
 * Starts bench/<file>.ts with `env` added to this process's environment. A figure named in `expected` that it did not
 * print is added as an error figure (and printed) when it ends.
 */
export function startBench(file: string, env: Record<string, string>, expected: string[] = []): BenchRun {
  const child = spawn(process.execPath, ['--import', 'tsx', join('bench', `${file}.ts`)], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    detached: true,
  });
  const pid = child.pid!;
  running.add(pid);
  const figures: Fig[] = [];
  let buf = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      process.stdout.write(`${line}\n`);
      try {
        const f = JSON.parse(line) as Fig;
        if (typeof f.bench === 'string') figures.push(f);
      } catch {
        /* not a figure */
      }
    }
  });
  /** One deadline at a time: to be ready, to measure, to end. */
  let timer: NodeJS.Timeout | undefined;
  const deadline = (ms: number, what: string) => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      process.stderr.write(`${file}: ${what} after ${ms} ms; stopping it\n`);
      stop(pid);
    }, ms);
  };
  deadline(PREPARE_TIMEOUT_MS, 'not ready to measure');
  let exited = false;
  /** Whoever waits for the bench's next message (ready, measured) is also woken when it exits. */
  let waiting: ((m: { type?: string; figures?: Fig[] } | null) => void) | null = null;
  const nextMessage = () =>
    new Promise<{ type?: string; figures?: Fig[] } | null>((resolve) => {
      if (exited) return resolve(null);
      waiting = resolve;
    });
  let readyAt: number | null = null;
  const ready = nextMessage().then((m) => {
    if (m?.type === 'ready') readyAt = Date.now();
  });
  child.on('message', (m: { type?: string; figures?: Fig[] }) => {
    const w = waiting;
    waiting = null;
    w?.(m);
  });
  const done = new Promise<{ figures: Fig[]; exit: string }>((resolve) => {
    child.on('exit', (code, signal) => {
      exited = true;
      clearTimeout(timer);
      running.delete(pid);
      const w = waiting;
      waiting = null;
      w?.(null);
      const exit = signal ? `killed by ${signal}` : `exit ${code}`;
      for (const name of expected) {
        if (figures.some((f) => f.bench === name)) continue;
        const missing = {
          bench: name,
          n: 0,
          error: `${file}.ts ended (${exit}) without this figure`,
          target: '',
          pass: false,
        };
        process.stdout.write(`${JSON.stringify(missing)}\n`);
        figures.push(missing);
      }
      resolve({ figures, exit });
    });
  });
  const send = (type: string) => {
    if (!exited && child.connected) child.send({ type }, () => {});
  };
  return {
    ready,
    async measure() {
      await ready;
      if (exited) return null;
      deadline(MEASURE_TIMEOUT_MS, 'still measuring');
      const answer = nextMessage();
      send('go');
      const m = await answer;
      clearTimeout(timer);
      return m?.type === 'measured' ? (m.figures ?? []) : null;
    },
    finish() {
      if (!exited) deadline(FINISH_TIMEOUT_MS, 'still cleaning up');
      send('finish');
      return done;
    },
    get ended() {
      return exited;
    },
    get readyAt() {
      return readyAt;
    },
  };
}

/** Runs one bench from start to end, letting it measure once as soon as it is ready. */
export async function runBench(
  file: string,
  env: Record<string, string>,
  expected: string[] = [],
): Promise<{ figures: Fig[]; exit: string }> {
  const run = startBench(file, env, expected);
  await run.measure();
  return run.finish();
}
