// Test-only helpers that play the hostile sandbox: real symlinks, FIFOs, devices and a process racing our calls.
import { spawn, execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { isSandgateError, type ErrorCode } from '@sandgate/contracts';

export const SECRET = 'OUTSIDE SECRET\n';

export interface Fixture {
  base: string;
  /** The session directory. */
  root: string;
  /** Holds secret.txt, which must never be reached through root. */
  outside: string;
  /** Registers cleanup that must finish before the directories are removed (node:test runs after-hooks in order). */
  defer(fn: () => Promise<void>): void;
}

export async function fixture(t: TestContext): Promise<Fixture> {
  const base = await mkdtemp(join(tmpdir(), 'sandgate-storage-'));
  const deferred: Array<() => Promise<void>> = [];
  t.after(async () => {
    for (const fn of deferred.reverse()) await fn();
    await rm(base, { recursive: true, force: true });
  });
  const root = join(base, 'root');
  const outside = join(base, 'outside');
  await mkdir(root);
  await mkdir(outside);
  await writeFile(join(outside, 'secret.txt'), SECRET);
  return { base, root, outside, defer: (fn) => deferred.push(fn) };
}

/** A predicate for assert.rejects/throws: a SandgateError with this code. */
export function code(expected: ErrorCode): (e: unknown) => boolean {
  return (e) => {
    assert(isSandgateError(e), `expected SandgateError(${expected}), got ${String(e)}`);
    assert(e.code === expected, `expected code ${expected}, got ${e.code}: ${e.message}`);
    return true;
  };
}

function assert(ok: boolean, message: string): asserts ok {
  if (!ok) throw new Error(message);
}

export function mkfifo(path: string): void {
  execFileSync('mkfifo', [path]);
}

/** A character device with /dev/null's numbers; false where the kernel refuses mknod (no CAP_MKNOD). */
export function mknodNull(path: string): boolean {
  try {
    execFileSync('mknod', [path, 'c', '1', '3'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts a process that keeps swapping root/<name> between a real directory (kept at `<name>.a` while out of place)
 * holding `files` and a symlink to `target` (kept at `<name>.b`), as fast as rename(2) allows, until stopped or the
 * test ends. Anything to put in the directory must be given here: once swapping, its location is never stable.
 */
export async function startSwapper(
  fx: Fixture,
  name: string,
  target: string,
  files: Record<string, string> = {},
): Promise<() => Promise<void>> {
  const makeDir = async (p: string) => {
    await mkdir(p);
    for (const [file, content] of Object.entries(files)) await writeFile(join(p, file), content);
  };
  return startFlipper(fx, name, makeDir, (p) => symlink(target, p));
}

/** Like startSwapper, with whatever two things `makeA` and `makeB` create. Returns `stop`, also run at cleanup. */
export async function startFlipper(
  fx: Fixture,
  name: string,
  makeA: (path: string) => Promise<unknown>,
  makeB: (path: string) => Promise<unknown>,
): Promise<() => Promise<void>> {
  const d = join(fx.root, name);
  await rm(d, { recursive: true, force: true });
  await makeA(`${d}.a`);
  await makeB(`${d}.b`);
  // Code under test may create <name> while it is away (a missing parent); such strays are moved aside, so they hold
  // whatever was written "into" the swapped name, and the swapping goes on. Once the pair is gone (removed by the code
  // under test), the swapper quietly exits.
  const script = `const fs = require('node:fs'); const [d] = process.argv.slice(1); let n = 0;
    const place = (src) => { for (let i = 0; i < 1000; i++) { try { return fs.renameSync(src, d); } catch { try { fs.renameSync(d, d + '.stray' + n++); } catch {} } } process.exit(0); };
    process.stdout.write('go\\n');
    try { for (;;) { place(d + '.a'); fs.renameSync(d, d + '.a'); place(d + '.b'); fs.renameSync(d, d + '.b'); } } catch { process.exit(0); }`;
  const child = spawn(process.execPath, ['-e', script, d], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    child.kill('SIGKILL');
    await exited;
  };
  fx.defer(stop);
  await new Promise<void>((resolve, reject) => {
    child.stdout?.once('data', () => resolve());
    child.once('error', reject);
  });
  return stop;
}

/** Runs `attempt` for about `ms` milliseconds (at least `min` times), or until it returns true. Returns the count. */
export async function hammer(
  ms: number,
  min: number,
  attempt: (i: number) => Promise<boolean | void>,
): Promise<number> {
  const end = Date.now() + ms;
  let i = 0;
  while (Date.now() < end || i < min) {
    if ((await attempt(i++)) === true) break;
  }
  return i;
}
