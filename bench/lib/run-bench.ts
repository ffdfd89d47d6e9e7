/**
 * Running one bench script as a child process of its own (so one's memory or sockets never colour the next), its
 * JSON lines passed through to stdout and collected; shared by `npm run bench` (run-all.ts) and `npm run bench:ci`.
 * A bench says over the IPC channel when it is ready to measure (`measuring()` in bench/lib/main.ts) and waits to be
 * told to go: bench:ci starts several at once, so their slow start-ups overlap, and lets them measure one at a time.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './stack.ts';

export type Fig = Record<string, any>;

/** How long a bench may measure (from `go`) and, before that, prepare. */
const MEASURE_TIMEOUT_MS = 300_000;
const PREPARE_TIMEOUT_MS = 300_000;
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
  /** Lets it measure. */
  go(): void;
  /** The figures it printed and how it ended. */
  done: Promise<{ figures: Fig[]; exit: string }>;
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
 * print is added as an error figure (and printed).
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
  let timer = setTimeout(() => {
    process.stderr.write(`${file} not ready to measure after ${PREPARE_TIMEOUT_MS} ms; stopping it\n`);
    stop(pid);
  }, PREPARE_TIMEOUT_MS);
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  child.on('message', (m: { type?: string }) => {
    if (m?.type === 'ready') markReady();
  });
  let exited = false;
  const done = new Promise<{ figures: Fig[]; exit: string }>((resolve) => {
    child.on('exit', (code, signal) => {
      exited = true;
      clearTimeout(timer);
      running.delete(pid);
      markReady();
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
  let went = false;
  return {
    ready,
    done,
    go() {
      if (went || exited) return;
      went = true;
      clearTimeout(timer);
      timer = setTimeout(() => {
        process.stderr.write(`${file} still measuring after ${MEASURE_TIMEOUT_MS} ms; stopping it\n`);
        stop(pid);
      }, MEASURE_TIMEOUT_MS);
      if (child.connected) child.send({ type: 'go' }, () => {});
    },
  };
}

/** Runs one bench from start to end, letting it measure as soon as it is ready. */
export async function runBench(
  file: string,
  env: Record<string, string>,
  expected: string[] = [],
): Promise<{ figures: Fig[]; exit: string }> {
  const run = startBench(file, env, expected);
  await run.ready;
  run.go();
  return run.done;
}
