/**
 * Running one bench script as a child process of its own (so one's memory or sockets never colour the next), its
 * JSON lines passed through to stdout and collected; shared by `npm run bench` (run-all.ts) and `npm run bench:ci`.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './stack.ts';

export type Fig = Record<string, any>;

const BENCH_TIMEOUT_MS = 300_000;
/** The bench running now (its own process group): Ctrl-C or SIGTERM here is passed on, so it cleans up. */
let current: number | null = null;
let interrupted = false;

/** Passes SIGINT and SIGTERM on to the bench running now; `isInterrupted()` then answers true. */
export function forwardSignals(): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      interrupted = true;
      if (current === null) process.exit(130);
      try {
        process.kill(-current, signal);
      } catch {
        /* gone */
      }
    });
  }
}

export const isInterrupted = (): boolean => interrupted;

/**
 * Runs bench/<file>.ts with `env` added to this process's environment; resolves with the figures it printed and how
 * it ended. A figure named in `expected` that it did not print is added as an error figure (and printed).
 */
export function runBench(
  file: string,
  env: Record<string, string>,
  expected: string[] = [],
  timeoutMs = BENCH_TIMEOUT_MS,
): Promise<{ figures: Fig[]; exit: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join('bench', `${file}.ts`)], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
      detached: true,
    });
    current = child.pid ?? null;
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
    const timer = setTimeout(() => {
      process.stderr.write(`${file} still running after ${timeoutMs} ms; stopping it\n`);
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        /* gone */
      }
      // SIGTERM lets it clean up (bench/lib/main.ts); only if that hangs is the group killed outright.
      setTimeout(() => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          /* gone */
        }
      }, 60_000).unref();
    }, timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      current = null;
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
}
