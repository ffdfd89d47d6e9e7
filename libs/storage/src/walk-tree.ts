import { lstat, opendir, type FileHandle } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { SandgateError } from '@sandgate/contracts';
import { NOT_THERE, at, errno, openChildDir, openRoot } from './fd-path.ts';
import { isServableFile } from './open-inside.ts';
import { MAX_PATH_BYTES, MAX_SEGMENTS, segmentProblem } from './user-path.ts';

export interface TreeEntry {
  path: string;
  size: number;
  mtimeMs: number;
  ino: number;
  dev: number;
  ctimeMs: number;
}
export interface WalkOptions {
  /** Files listed before stopping with `truncated: true`. Default 10_000. */
  maxEntries?: number;
  /** Deepest file path, in segments, that is listed. Default 32 (the most a client path may have). */
  maxDepth?: number;
  /** Lists only paths after this one in walk order (see comparePaths): the position of a paged listing. */
  after?: string;
}

/**
 * The order walkTree lists in: segment by segment, each compared as a string, so `a/b` comes before `a-c`
 * (a directory's files come right after its name). A directory walk sorted per directory yields exactly this
 * order, which is what lets a listing stop after N entries and resume after the last.
 */
export function comparePaths(a: string, b: string): number {
  const x = a.split('/');
  const y = b.split('/');
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1;
  }
  return x.length - y.length;
}

const BATCH = 64;

interface Walk {
  entries: TreeEntry[];
  /** Something was left out. */
  truncated: boolean;
  /** A limit on the whole walk was hit (not just one directory too deep): stop everything. */
  stopped: boolean;
  /** maxEntries were listed and another was found: a paged listing has a next page. */
  more: boolean;
  after: string | undefined;
  maxEntries: number;
  maxDepth: number;
  budget: number;
}

/**
 * Lists the regular, single-linked files under root. Only names a client could address (see normalizeUserPath) are
 * listed, so every entry can be downloaded; everything else is skipped, and nothing is ever followed.
 */
export async function walkTree(
  root: string,
  { maxEntries = 10_000, maxDepth = MAX_SEGMENTS, after }: WalkOptions = {},
): Promise<{ entries: TreeEntry[]; truncated: boolean; more: boolean }> {
  let dir: FileHandle;
  try {
    dir = await openRoot(root);
  } catch (e) {
    if (NOT_THERE.has(errno(e) ?? '')) {
      throw new SandgateError('file_not_found', 'the workspace directory does not exist', { cause: e });
    }
    throw e;
  }
  // Empty directories cost nothing towards maxEntries, so a separate budget bounds the work hostile code can cause.
  const budget = Math.max(100_000, maxEntries * 10);
  const walk: Walk = {
    entries: [],
    truncated: false,
    stopped: false,
    more: false,
    after,
    maxEntries,
    maxDepth,
    budget,
  };
  try {
    await walkDir(dir, '', 1, walk);
  } finally {
    await dir.close();
  }
  walk.entries.sort((a, b) => comparePaths(a.path, b.path));
  return { entries: walk.entries, truncated: walk.truncated, more: walk.more };
}

/**
 * Names read as bytes; one that is not valid UTF-8 could not be asked for by name, so it is left out. Read a batch at
 * a time (the event loop runs in between) and at most `limit`: a directory of a million names costs no more than
 * the walk may still look at. Sorted, so which files survive truncation does not depend on directory order when the
 * whole directory fits.
 */
async function listNames(dir: FileHandle, limit: number): Promise<{ names: string[]; cut: boolean }> {
  const names: string[] = [];
  let read = 0;
  let cut = false;
  const handle = await opendir(at(dir), { encoding: 'buffer' as BufferEncoding, bufferSize: 256 });
  try {
    for await (const entry of handle) {
      if (read++ >= limit) {
        cut = true;
        break;
      }
      const buf = entry.name as unknown as Buffer;
      const name = buf.toString('utf8');
      if (Buffer.from(name, 'utf8').equals(buf) && segmentProblem(name) === undefined) names.push(name);
    }
  } finally {
    await handle.close().catch(() => {}); // closed already when the iteration ran to its end
  }
  return { names: names.sort(), cut };
}

async function walkDir(dir: FileHandle, prefix: string, depth: number, walk: Walk): Promise<void> {
  const { names, cut } = await listNames(dir, Math.max(0, walk.budget));
  if (cut) walk.truncated = true;
  for (let i = 0; i < names.length; i += BATCH) {
    const batch = names.slice(i, i + BATCH);
    const stats = await Promise.all(batch.map((n) => lstat(at(dir, n)).catch(() => undefined)));
    for (const [k, name] of batch.entries()) {
      if (walk.stopped) return;
      if (--walk.budget < 0) {
        walk.truncated = walk.stopped = true;
        return;
      }
      const st = stats[k];
      if (st) await visit(dir, prefix + name, name, st, depth, walk);
    }
  }
}

async function visit(dir: FileHandle, path: string, name: string, st: Stats, depth: number, walk: Walk): Promise<void> {
  if (st.isDirectory()) {
    // Everything under a directory that sorts before the position, and does not hold it, was listed already.
    if (walk.after !== undefined && comparePaths(path, walk.after) < 0 && !walk.after.startsWith(`${path}/`)) return;
    if (depth >= walk.maxDepth) {
      walk.truncated = true;
      return;
    }
    let child: FileHandle;
    try {
      child = await openChildDir(dir, name); // no-follow: a directory swapped for a symlink since lstat is refused
    } catch (e) {
      if (NOT_THERE.has(errno(e) ?? '')) return;
      throw e;
    }
    try {
      await walkDir(child, `${path}/`, depth + 1, walk);
    } finally {
      await child.close();
    }
    return;
  }
  if (!isServableFile(st) || Buffer.byteLength(path) > MAX_PATH_BYTES) return;
  if (walk.after !== undefined && comparePaths(path, walk.after) <= 0) return;
  if (walk.entries.length >= walk.maxEntries) {
    walk.truncated = walk.stopped = walk.more = true;
    return;
  }
  walk.entries.push({ path, size: st.size, mtimeMs: st.mtimeMs, ino: st.ino, dev: st.dev, ctimeMs: st.ctimeMs });
}
