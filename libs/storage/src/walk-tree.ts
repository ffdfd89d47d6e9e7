import { lstat, readdir, type FileHandle } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { SandgateError } from '@sandgate/contracts';
import { NOT_THERE, at, errno, openChildDir, openRoot } from './fd-path.ts';
import { isServableFile } from './open-inside.ts';
import { MAX_PATH_BYTES, MAX_SEGMENTS, segmentProblem } from './user-path.ts';

export interface TreeEntry { path: string; size: number; mtimeMs: number; ino: number; dev: number; ctimeMs: number }
export interface WalkOptions {
  /** Files listed before stopping with `truncated: true`. Default 10_000. */
  maxEntries?: number;
  /** Deepest file path, in segments, that is listed. Default 32 (the most a client path may have). */
  maxDepth?: number;
}

const BATCH = 64;

interface Walk {
  entries: TreeEntry[];
  /** Something was left out. */
  truncated: boolean;
  /** A limit on the whole walk was hit (not just one directory too deep): stop everything. */
  stopped: boolean;
  maxEntries: number;
  maxDepth: number;
  budget: number;
}

/**
 * Lists the regular, single-linked files under root. Only names a client could address (see normalizeUserPath) are
 * listed, so every entry can be downloaded; everything else is skipped, and nothing is ever followed.
 */
export async function walkTree(root: string, { maxEntries = 10_000, maxDepth = MAX_SEGMENTS }: WalkOptions = {}):
  Promise<{ entries: TreeEntry[]; truncated: boolean }> {
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
  const walk: Walk = { entries: [], truncated: false, stopped: false, maxEntries, maxDepth, budget };
  try {
    await walkDir(dir, '', 1, walk);
  } finally {
    await dir.close();
  }
  walk.entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { entries: walk.entries, truncated: walk.truncated };
}

/** Names read as bytes; one that is not valid UTF-8 could not be asked for by name, so it is left out. */
async function listNames(dir: FileHandle): Promise<string[]> {
  const raw = await readdir(at(dir), { encoding: 'buffer' });
  const names: string[] = [];
  for (const buf of raw) {
    const name = buf.toString('utf8');
    if (Buffer.from(name, 'utf8').equals(buf) && segmentProblem(name) === undefined) names.push(name);
  }
  // Sorted so that which files survive truncation does not depend on directory order.
  return names.sort();
}

async function walkDir(dir: FileHandle, prefix: string, depth: number, walk: Walk): Promise<void> {
  const names = await listNames(dir);
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
  if (walk.entries.length >= walk.maxEntries) {
    walk.truncated = walk.stopped = true;
    return;
  }
  walk.entries.push({ path, size: st.size, mtimeMs: st.mtimeMs, ino: st.ino, dev: st.dev, ctimeMs: st.ctimeMs });
}
