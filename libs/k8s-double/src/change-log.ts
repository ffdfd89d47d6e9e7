import { gone } from './status.ts';
import type { K8sObject, Kind } from './store.ts';

/** One write to the store as a watch sees it: the object after it (for a delete, its last state) and before it. */
export interface Change {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  kind: Kind;
  /** The resourceVersion the write made. */
  rv: number;
  object: K8sObject;
  /** The object before the write; absent for ADDED. */
  previous?: K8sObject;
}

export type ChangeListener = (change: Change) => void;

/**
 * The watch cache: the last `capacity` changes of each kind, for a watch that resumes from a resourceVersion, and
 * the watches waiting for the next ones. A resourceVersion older than the kept history is 410 Expired, worded as
 * the API server words it (`too old resource version: <asked> (<oldest it can resume from>)`).
 */
export class ChangeLog {
  readonly #history = new Map<Kind, Change[]>();
  /** Per kind, the oldest resourceVersion a watch can resume from: the store's first one until changes are dropped. */
  readonly #floor = new Map<Kind, number>();
  readonly #listeners = new Set<ChangeListener>();

  constructor(
    private readonly capacity: number,
    private readonly startRv: number,
  ) {}

  record(change: Change): void {
    const kept = this.#history.get(change.kind) ?? [];
    this.#history.set(change.kind, kept);
    kept.push(change);
    if (kept.length > this.capacity) {
      kept.shift();
      this.#floor.set(change.kind, kept[0]!.rv - 1);
    }
    for (const l of this.#listeners) l(change);
  }

  /** The changes of a kind made after `rv`, oldest first; 410 Expired when some of them are no longer kept. */
  since(kind: Kind, rv: number): Change[] {
    const floor = this.#floor.get(kind) ?? this.startRv;
    if (rv < floor) throw gone(`too old resource version: ${rv} (${floor})`);
    return (this.#history.get(kind) ?? []).filter((c) => c.rv > rv);
  }

  /** Calls `listener` with every change from now on, until the returned function is called. */
  listen(listener: ChangeListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Watches listening now. */
  get listeners(): number {
    return this.#listeners.size;
  }
}
