import type { ExecutionJob } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import { harvest, snapshot, type CollectOptions, type Harvest, type Snapshot } from './artifacts.ts';
import type { RunEnd } from '../outcome/result.ts';

/** A file the run wrote that its transport could not bring into the session store, and why. */
export interface TransferFailure {
  path: string;
  reason: string;
}

/** What the harvesting step found: the artifacts, and what is missing from them and why. */
export interface HarvestReport extends Harvest {
  /**
   * Files the run wrote that never reached the store: a one-shot Pod's uploads the gateway refused (quota, a path no
   * client could address), a session Pod's files the worker could not fetch. Empty where files are written in place.
   */
  failed: TransferFailure[];
}

/** One run, as the harvesting step needs it. */
export interface HarvestRun {
  end: RunEnd;
  job: ExecutionJob;
  /** The session's directory in the store. */
  dir: string;
  /** The store before the run (snapshot). */
  before: Snapshot;
  signal?: AbortSignal;
  /** What the run's transport failed to bring into the store, if it moved files (Pods). */
  failed?: TransferFailure[];
}

/**
 * Where a run's files end up and how its artifacts are found there: every backend takes its snapshot before a run
 * and harvests through it after. The session store is a filesystem the workers share today (LocalArtifactStore);
 * sandboxes that do not share it reach it through a transport of their own — a one-shot Pod's harvest container
 * uploads through the gateway with a transfer token, a session or pool Pod's files come back over the worker's
 * connection to its agent — and hand what failed to the report.
 */
export interface ArtifactStore {
  snapshot(dir: string): Promise<Snapshot>;
  harvest(run: HarvestRun, events: EventSink): Promise<HarvestReport>;
}

/** The session store as a directory tree: artifacts are the files a completed run created or changed in it. */
export class LocalArtifactStore implements ArtifactStore {
  readonly #artifactUrl: CollectOptions['artifactUrl'];
  constructor(artifactUrl: CollectOptions['artifactUrl']) {
    this.#artifactUrl = artifactUrl;
  }

  snapshot(dir: string): Promise<Snapshot> {
    return snapshot(dir);
  }

  async harvest(run: HarvestRun, events: EventSink): Promise<HarvestReport> {
    const found = await harvest(run.end, run.job, run.dir, run.before, events, this.#artifactUrl, run.signal);
    return { ...found, failed: run.failed ?? [] };
  }
}
