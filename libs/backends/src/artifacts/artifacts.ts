import { basename } from 'node:path';
import type { Artifact, ExecutionJob } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import { outcomeOf, type RunEnd } from '../outcome/result.ts';
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

/**
 * Bytes hashed per run, over all its files. Past it the rest are not reported: a run can make a thousand sparse
 * 1 TiB files that cost no disk, and hashing them would hold the worker for days.
 */
export const MAX_HARVEST_HASH_BYTES = 4 * 1024 ** 3;
/** How long a run's harvest may take; what is hashed by then is reported. */
export const HARVEST_DEADLINE_MS = 60_000;

export interface CollectOptions {
  sessionId: string;
  /** Builds the URL a client downloads an artifact from. */
  artifactUrl: (sessionId: string, path: string) => string;
  /** Default MAX_ARTIFACTS. */
  maxArtifacts?: number;
  /** Default MAX_WALK_ENTRIES. */
  maxEntries?: number;
  /** Default MAX_HARVEST_HASH_BYTES. */
  maxHashBytes?: number;
  /** Default HARVEST_DEADLINE_MS. */
  deadlineMs?: number;
  /** The run's own signal (cancel, shutdown): harvesting stops with it. */
  signal?: AbortSignal;
}

/** What a harvest found; `truncated` when some changed files were left out by one of its bounds. */
export interface Harvest {
  artifacts: Artifact[];
  truncated: boolean;
}

/**
 * The files under `root` created or changed since `before`, sorted by path. Only regular files with a
 * single link count (walkTree's guarantee): a symlink, FIFO, device or hard link the sandbox made is never
 * reported, so nothing outside the workspace can be smuggled out as an artifact. A file that vanishes or
 * turns into something else between the walk and the hash is skipped. Bounded: at most maxArtifacts files,
 * maxHashBytes hashed, deadlineMs spent, and it stops when `signal` fires; any of those marks it truncated.
 */
export async function collectArtifacts(root: string, before: Snapshot, opts: CollectOptions): Promise<Harvest> {
  const {
    sessionId,
    artifactUrl,
    maxArtifacts = MAX_ARTIFACTS,
    maxEntries = MAX_WALK_ENTRIES,
    maxHashBytes = MAX_HARVEST_HASH_BYTES,
    deadlineMs = HARVEST_DEADLINE_MS,
  } = opts;
  const signal = AbortSignal.any([AbortSignal.timeout(deadlineMs), ...(opts.signal ? [opts.signal] : [])]);
  const walked = await walkTree(root, { maxEntries });
  const changed = walked.entries.filter((e) => before.get(e.path) !== fingerprint(e));
  const artifacts: Artifact[] = [];
  let truncated = walked.truncated;
  let budget = maxHashBytes;
  for (const entry of changed) {
    if (artifacts.length >= maxArtifacts || signal.aborted) {
      truncated = true;
      break;
    }
    const hashed = await sha256Inside(root, entry.path, { maxBytes: budget, signal }).catch(() => undefined);
    if (hashed === undefined) continue;
    if (hashed === null) {
      truncated = true;
      continue;
    }
    budget -= hashed.size;
    artifacts.push({
      path: entry.path,
      filename: basename(entry.path),
      size_bytes: hashed.size,
      mime_type: mimeFor(entry.path),
      sha256: hashed.sha256,
      download_url: artifactUrl(sessionId, entry.path),
    });
  }
  return { artifacts, truncated: truncated || signal.aborted };
}

/**
 * The `harvesting` step every kind of run ends with: the files a run that completed created or changed under `dir`,
 * each reported as an artifact event as well. A run that did not complete leaves no artifacts.
 */
export async function harvest(
  end: RunEnd,
  job: ExecutionJob,
  dir: string,
  before: Snapshot,
  events: EventSink,
  artifactUrl: CollectOptions['artifactUrl'],
  signal?: AbortSignal,
): Promise<Harvest> {
  events.phase('harvesting');
  if (outcomeOf(end, job).state !== 'completed') return { artifacts: [], truncated: false };
  const found = await collectArtifacts(dir, before, { sessionId: job.session_id, artifactUrl, signal });
  for (const artifact of found.artifacts) events.artifact(artifact);
  return found;
}
