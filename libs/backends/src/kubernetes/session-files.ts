import { lutimes } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { openInside, removeInside, walkTree, writeFileInside, type TreeEntry } from '@sandgate/storage';
import type { FileChannel } from '../agent/agent-channel.ts';
import type { ManifestEntry } from '../agent/agent-frames.ts';
import { MAX_WALK_ENTRIES } from '../artifacts/artifacts.ts';
import type { BackendLogger } from '../logger.ts';
import type { TransferFailure } from '../artifacts/artifact-store.ts';

/** A manifest answers at once; a file gets this much plus a second per 20 MB. */
const REQUEST_MS = 30_000;
const timeFor = (bytes: number): number => REQUEST_MS + Math.ceil(bytes / 20_000);
/** How long bringing one run's files back may take in all, past which the rest are reported as not kept. */
const PULL_DEADLINE_MS = 5 * 60_000;

/**
 * A file is the same on both sides when its size and its mtime (to the millisecond) are: every file the worker moves
 * takes the mtime of its source, so what a run did not touch compares equal, and what it wrote does not.
 */
const same = (store: TreeEntry | undefined, pod: ManifestEntry | undefined): boolean =>
  store !== undefined && pod !== undefined && store.size === pod[1] && Math.floor(store.mtimeMs) === pod[2];

/** A Pod file is as the last sync left it when its size and mtime are. */
const unchanged = (before: ManifestEntry, pod: ManifestEntry): boolean => before[1] === pod[1] && before[2] === pod[2];

/**
 * Before a run: makes the session Pod's workspace what the session store holds. What differs (an upload since the last
 * sync, a fresh Pod) is sent; what the store no longer has (deleted through the API) is removed from the Pod. What the
 * Pod changed since the last sync (a terminal, a service) is brought back first (pullFiles), so this does not undo it.
 * Answers what both sides hold now (`whole`: both listings were, so it is all they hold).
 */
export async function pushFiles(channel: FileChannel, dir: string, log: BackendLogger): Promise<Synced> {
  const [pod, store] = await Promise.all([
    channel.manifest(REQUEST_MS),
    walkTree(dir, { maxEntries: MAX_WALK_ENTRIES }),
  ]);
  const inPod = new Map(pod.files.map((e) => [e[0], e]));
  for (const entry of store.entries) {
    if (same(entry, inPod.get(entry.path))) continue;
    const { handle, stat } = await openInside(dir, entry.path).catch(() => ({ handle: undefined, stat: undefined }));
    if (handle === undefined) continue; // gone since the walk
    try {
      const source = handle.createReadStream({ autoClose: false, end: Math.max(0, stat.size - 1) });
      await channel.put(
        entry.path,
        stat.size === 0 ? Readable.from([]) : source,
        Math.floor(stat.mtimeMs),
        timeFor(stat.size),
      );
    } finally {
      await handle.close();
    }
  }
  // Only with both listings whole: a file past a truncated listing is not known to be gone.
  if (!store.truncated && !pod.truncated) {
    const inStore = new Set(store.entries.map((e) => e.path));
    const gone = pod.files.map((e) => e[0]).filter((p) => !inStore.has(p));
    if (gone.length > 0) await channel.remove(gone, REQUEST_MS);
  }
  if (store.truncated) log.warn({ dir }, 'the session holds more files than one run takes to its Pod');
  const baseline: Baseline = new Map(store.entries.map((e) => [e.path, [e.path, e.size, Math.floor(e.mtimeMs)]]));
  return { baseline, whole: !store.truncated && !pod.truncated };
}

/**
 * The files as the Pod held them when it and the store were last made the same (a push, a pull): path → entry. It is
 * the third side of the sync: a Pod file that differs from it is one the Pod changed (a run, a terminal, a service),
 * a store file that differs from it is one the API changed (an upload, a deletion) since.
 */
export type Baseline = Map<string, ManifestEntry>;

/** A sync's baseline, and whether it is all the files (neither listing was truncated): only then is it kept. */
export interface Synced {
  baseline: Baseline;
  whole: boolean;
}

/** What bounds the files brought back, besides each file's own bound, and how a result names it. */
export interface PullBounds {
  /** E.g. "the session's disk quota", "the size of volume data". */
  what: string;
  /** All the files, as the Pod holds them after the run, may take at most this much; the rest is not kept. */
  totalBytes?: number;
}

/**
 * Brings what the Pod changed since the last sync (`baseline`) back into the session store (`dir`): after a run, what
 * it wrote and deleted, so the shared harvest finds the run's artifacts there as on every backend; before a run, what a
 * terminal or a service changed since the last one. A three-way sync:
 * - a Pod file that differs from the baseline (new, or changed) is fetched, unless the store holds it already;
 * - a Pod file the same as in the baseline is left: the store's version (an upload that came meanwhile) stands, and the
 *   next push takes it to the Pod;
 * - a file in the baseline and no longer in the Pod is removed from the store, unless the store changed it since;
 * - both changed the same file: the Pod's version wins, as the sandbox's write does on Docker (docs/kubernetes.md).
 * Without a baseline (none kept for this Pod: see SyncedFiles) every Pod file that differs from the store is fetched
 * and nothing is removed: the Pod's copy of a file uploaded meanwhile then wins.
 * Each file is bounded by `maxFileBytes` (the session disk quota, a volume's size), and all of them by
 * `bounds.totalBytes`; paths come from the Pod, where hostile code ran, and are checked as a client's are. `full`: some
 * file was not kept for want of room (the bound, or the store's own quota). `synced`: the baseline now, when both
 * listings were whole; a file that was not kept keeps its old entry, so the next sync tries it again.
 */
export async function pullFiles(
  channel: FileChannel,
  baseline: Baseline | undefined,
  dir: string,
  maxFileBytes: number,
  log: BackendLogger,
  sessionId: string,
  bounds: PullBounds = { what: "the session's disk quota" },
): Promise<{ failed: TransferFailure[]; full: boolean; synced: Baseline | undefined }> {
  const [pod, store] = await Promise.all([
    channel.manifest(REQUEST_MS),
    walkTree(dir, { maxEntries: MAX_WALK_ENTRIES }),
  ]);
  const inStore = new Map(store.entries.map((e) => [e.path, e]));
  const failed: TransferFailure[] = [];
  // The sizes come from the Pod, where the code ran: a file said to be larger than the quota is not asked for, and the
  // time a fetch may take follows the size that is allowed, not the one claimed.
  const deadline = Date.now() + PULL_DEADLINE_MS;
  let full = false;
  let total = 0;
  const synced: Baseline = new Map();
  for (const entry of pod.files) {
    const [path, size] = entry;
    total += size;
    const before = baseline?.get(path);
    // The same on both sides; or left as it was by the Pod, so whatever the store has now is newer.
    if (same(inStore.get(path), entry) || (before !== undefined && unchanged(before, entry))) {
      synced.set(path, entry);
      continue;
    }
    if (before !== undefined) synced.set(path, before); // until it is fetched: a file not kept is tried again
    if (size > maxFileBytes) {
      failed.push({ path, reason: `${size} bytes, over ${bounds.what} of ${maxFileBytes}` });
      full = true;
      continue;
    }
    if (bounds.totalBytes !== undefined && total > bounds.totalBytes) {
      failed.push({
        path,
        reason: `not kept: the files would take ${total} bytes, over ${bounds.what} of ${bounds.totalBytes}`,
      });
      full = true;
      continue;
    }
    if (Date.now() > deadline) {
      failed.push({ path, reason: `not fetched: the run's files took over ${PULL_DEADLINE_MS} ms to bring back` });
      continue;
    }
    const file = channel.get(path, Math.min(size, maxFileBytes), timeFor(size));
    try {
      await writeFileInside(dir, path, file.data, { maxBytes: maxFileBytes, overwrite: true });
      const { mtimeMs } = await file.done;
      await lutimes(join(dir, path), new Date(mtimeMs), new Date(mtimeMs));
      synced.set(path, [path, size, Math.floor(mtimeMs)]);
    } catch (err) {
      await file.done.catch(() => {});
      failed.push({ path, reason: (err as Error).message });
      full ||= (err as NodeJS.ErrnoException).code === 'EDQUOT' || (err as NodeJS.ErrnoException).code === 'ENOSPC';
    }
  }
  const whole = !store.truncated && !pod.truncated;
  if (whole && baseline !== undefined) {
    const inPod = new Set(pod.files.map((e) => e[0]));
    for (const entry of store.entries) {
      if (inPod.has(entry.path) || !same(entry, baseline.get(entry.path))) continue;
      await removeInside(dir, entry.path).catch(() => {});
    }
  }
  if (failed.length > 0) {
    log.warn({ sessionId, failed: failed.slice(0, 20), count: failed.length }, "some of the Pod's files were not kept");
  }
  return { failed, full, synced: whole ? synced : undefined };
}
