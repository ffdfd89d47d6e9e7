import { basename } from 'node:path';
import type { Artifact, ExecutionJob } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import { outcomeOf, type RunEnd } from './result.ts';
import { mimeFor, sha256Inside, walkTree, type TreeEntry } from '@sandgate/storage';

/** At most this many artifacts are reported per run; a run that writes more gets the first ones by path. */
export const MAX_ARTIFACTS = 1_000;
/**
 * Files looked at per walk, so a sandbox that makes a million files cannot stall the worker. walkTree lists
 * in path order, so a truncated walk covers the same files before and after a run.
 */
export const MAX_WALK_ENTRIES = 10_000;

/** The state of a workspace before a run: path → fingerprint. */
export type Snapshot = Map<string, string>;

// ctime and inode catch what size+mtime miss: a rewrite that keeps both (utime reset) or a file
// replaced by another through rename.
const fingerprint = (e: TreeEntry): string => `${e.size}:${e.mtimeMs}:${e.ctimeMs}:${e.ino}`;

/** Records the regular files under `root`, to tell afterwards what a run created or changed. */
export async function snapshot(root: string, maxEntries: number = MAX_WALK_ENTRIES): Promise<Snapshot> {
  const { entries } = await walkTree(root, { maxEntries });
  return new Map(entries.map((e) => [e.path, fingerprint(e)]));
}

export interface CollectOptions {
  sessionId: string;
  /** Builds the URL a client downloads an artifact from. */
  artifactUrl: (sessionId: string, path: string) => string;
  /** Default MAX_ARTIFACTS. */
  maxArtifacts?: number;
  /** Default MAX_WALK_ENTRIES. */
  maxEntries?: number;
}

/**
 * The files under `root` created or changed since `before`, sorted by path. Only regular files with a
 * single link count (walkTree's guarantee): a symlink, FIFO, device or hard link the sandbox made is never
 * reported, so nothing outside the workspace can be smuggled out as an artifact. A file that vanishes or
 * turns into something else between the walk and the hash is skipped.
 */
export async function collectArtifacts(root: string, before: Snapshot, opts: CollectOptions): Promise<Artifact[]> {
  const { sessionId, artifactUrl, maxArtifacts = MAX_ARTIFACTS, maxEntries = MAX_WALK_ENTRIES } = opts;
  const { entries } = await walkTree(root, { maxEntries });
  const changed = entries.filter((e) => before.get(e.path) !== fingerprint(e));
  const artifacts: Artifact[] = [];
  for (const entry of changed) {
    if (artifacts.length >= maxArtifacts) break;
    const hashed = await sha256Inside(root, entry.path).catch(() => undefined);
    if (hashed === undefined) continue;
    artifacts.push({
      path: entry.path,
      filename: basename(entry.path),
      size_bytes: hashed.size,
      mime_type: mimeFor(entry.path),
      sha256: hashed.sha256,
      download_url: artifactUrl(sessionId, entry.path),
    });
  }
  return artifacts;
}

/**
 * The `harvesting` step every kind of run ends with: the files a run that completed created or changed under `dir`,
 * each reported as an artifact event as well. A run that did not complete leaves no artifacts.
 */
export async function harvest(
  end: RunEnd, job: ExecutionJob, dir: string, before: Snapshot, events: EventSink, artifactUrl: CollectOptions['artifactUrl'],
): Promise<Artifact[]> {
  events.phase('harvesting');
  if (outcomeOf(end, job).state !== 'completed') return [];
  const artifacts = await collectArtifacts(dir, before, { sessionId: job.session_id, artifactUrl });
  for (const artifact of artifacts) events.artifact(artifact);
  return artifacts;
}
