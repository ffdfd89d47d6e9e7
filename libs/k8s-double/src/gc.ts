import type { PodWorker } from './kubelet.ts';
import type { K8sObject, Kind, Store } from './store.ts';

const KINDS: Kind[] = ['Pod', 'Secret'];

/**
 * The garbage collector and the kubelet's cleanup, driven by removals from the store: a removed Pod's Docker
 * objects go, and so does every object it owned (ownerReferences, background propagation). An object created
 * with owners none of which exist is removed after `orphanGraceMs`, as the GC does with a dangling owner.
 */
export class GarbageCollector {
  /** Docker cleanups of removed Pods still under way. */
  readonly teardowns = new Set<Promise<void>>();

  constructor(
    private readonly store: Store,
    private readonly workers: Map<string, PodWorker>,
    private readonly orphanGraceMs: number,
  ) {
    store.onRemove((kind, obj) => this.#removed(kind, obj));
    store.onInsert((kind, obj) => this.#inserted(kind, obj));
  }

  #removed(kind: Kind, obj: K8sObject): void {
    const uid = obj.metadata.uid!;
    const worker = kind === 'Pod' ? this.workers.get(uid) : undefined;
    if (worker) {
      this.workers.delete(uid);
      const done = worker.destroy().finally(() => this.teardowns.delete(done));
      this.teardowns.add(done);
    }
    for (const k of KINDS) {
      for (const dep of this.store.list(k)) {
        if (dep.metadata.ownerReferences?.some((r) => r.uid === uid)) this.#collect(k, dep);
      }
    }
  }

  #inserted(kind: Kind, obj: K8sObject): void {
    const owners = obj.metadata.ownerReferences ?? [];
    if (!owners.length || !KINDS.includes(kind)) return;
    setTimeout(() => {
      const current = this.store.get(kind, obj.metadata.namespace!, obj.metadata.name!);
      if (!current || current.metadata.uid !== obj.metadata.uid) return;
      const refs = current.metadata.ownerReferences ?? [];
      if (refs.length && refs.every((r) => this.store.findByUid(r.uid) === undefined)) this.#collect(kind, current);
    }, this.orphanGraceMs).unref();
  }

  /** A dependent whose owners are all gone: removed only if every owner it names is gone. */
  #collect(kind: Kind, dep: K8sObject): void {
    const alive = (dep.metadata.ownerReferences ?? []).some((r) => this.store.findByUid(r.uid) !== undefined);
    if (!alive) this.store.remove(kind, dep.metadata.namespace!, dep.metadata.name!);
  }
}
