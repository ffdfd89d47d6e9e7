import { randomBytes } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ManifestEntry } from '../agent/agent-frames.ts';
import { MAX_WALK_ENTRIES } from '../artifacts/artifacts.ts';
import type { Baseline } from './session-files.ts';

/** A session Pod's baselines: its workspace's, and each read-write volume's (by volumeKey). */
export interface PodBaselines {
  workspace?: Baseline | undefined;
  volumes: Map<string, Baseline>;
}

/** A baseline written within this long of a sweep's reading of the live sessions may be a session's made since. */
const MTIME_SLACK_MS = 1000;

/** A volume's baseline is the one of that volume at that mount path. */
export const volumeKey = (v: { id: string; path: string }): string => `${v.id}:${v.path}`;

/**
 * Where the baselines of session Pods' files (session-files.ts) are kept between runs: a file per session in the data
 * directory the workers share (`pod-files/<session>.json`, outside the session's own directory, which its files API
 * and its Pod reach), so the worker that takes a session's next run, this one restarted or another, syncs against the
 * same baseline as the one that ran the last. Each file names the Pod it is for (its uid): a Pod made since (a
 * replaced or resumed one, whose workspace starts empty) has none. Each baseline holds at most MAX_WALK_ENTRIES
 * entries, as the listings it is made of do.
 */
export class SyncedFiles {
  readonly #root: string;

  constructor(dataDir: string) {
    this.#root = join(dataDir, 'pod-files');
  }

  #file(sessionId: string): string {
    return join(this.#root, `${sessionId}.json`);
  }

  /** The baselines kept for the session's Pod `uid`; none when there are none for that Pod, or they cannot be read. */
  async load(sessionId: string, uid: string): Promise<PodBaselines> {
    const none: PodBaselines = { volumes: new Map() };
    const text = await readFile(this.#file(sessionId), 'utf8').catch(() => undefined);
    if (text === undefined) return none;
    try {
      const kept = JSON.parse(text) as { uid: string; workspace?: ManifestEntry[]; volumes?: Record<string, unknown> };
      if (kept.uid !== uid) return none;
      const volumes = new Map<string, Baseline>();
      for (const [key, entries] of Object.entries(kept.volumes ?? {})) {
        const baseline = baselineOf(entries);
        if (baseline !== undefined) volumes.set(key, baseline);
      }
      return { workspace: baselineOf(kept.workspace), volumes };
    } catch {
      return none; // not ours to trust: the old behaviour, a push of what the store holds
    }
  }

  /** Keeps `baselines` for the session's Pod `uid`, whole or not at all (a new file renamed over the old). */
  async save(sessionId: string, uid: string, baselines: PodBaselines): Promise<void> {
    const volumes = Object.fromEntries([...baselines.volumes].map(([key, b]) => [key, [...b.values()]]));
    const text = JSON.stringify({
      uid,
      ...(baselines.workspace ? { workspace: [...baselines.workspace.values()] } : {}),
      volumes,
    });
    await mkdir(this.#root, { recursive: true, mode: 0o700 });
    const temporary = `${this.#file(sessionId)}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      await writeFile(temporary, text, { mode: 0o600 });
      await rename(temporary, this.#file(sessionId));
    } catch (err) {
      await rm(temporary, { force: true });
      throw err;
    }
  }

  /** Forgets the session's baselines: its Pod is going. */
  async remove(sessionId: string): Promise<void> {
    await rm(this.#file(sessionId), { force: true });
  }

  /** Removes the baselines of sessions not in `live`, except those written since it was read (`readAt`). */
  async retain(live: ReadonlySet<string>, readAt?: number): Promise<void> {
    const names = await readdir(this.#root).catch(() => [] as string[]);
    await Promise.all(
      names.map(async (name) => {
        const sessionId = name.replace(/\.json(\..*\.tmp)?$/, '');
        if (live.has(sessionId)) return;
        const path = join(this.#root, name);
        const st = await lstat(path).catch(() => null);
        if (st === null || (readAt !== undefined && st.mtimeMs >= readAt - MTIME_SLACK_MS)) return;
        await rm(path, { force: true });
      }),
    );
  }
}

/** A kept list of entries as a baseline, or undefined when it is not one (none kept, malformed, too many). */
function baselineOf(entries: unknown): Baseline | undefined {
  if (!Array.isArray(entries) || entries.length > MAX_WALK_ENTRIES) return undefined;
  const baseline: Baseline = new Map();
  for (const e of entries as unknown[]) {
    if (!Array.isArray(e) || typeof e[0] !== 'string' || !Number.isSafeInteger(e[1]) || !Number.isSafeInteger(e[2])) {
      return undefined;
    }
    baseline.set(e[0], [e[0], e[1] as number, e[2] as number]);
  }
  return baseline;
}
