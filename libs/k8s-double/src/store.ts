import { randomUUID } from 'node:crypto';
import { ChangeLog } from './change-log.ts';

/** The kinds this API server keeps. */
export type Kind = 'Pod' | 'Secret' | 'Event';

/** A stored object: plain JSON, as it went over the wire. */
export interface K8sObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  [field: string]: unknown;
}

type Listener = (kind: Kind, obj: K8sObject) => void;

const keyOf = (namespace: string, name: string): string => `${namespace}/${name}`;

/** The first resourceVersion of every store: the one a watch cache starts from. */
const START_RV = 1000;

/**
 * The double's etcd: objects by kind and namespace/name, one resourceVersion counter for all of them, and the
 * changes watches read (`changes`). Readers always get copies, so nothing a handler does to an answer changes what
 * is stored.
 */
export class Store {
  #rv = START_RV;
  readonly #objects = new Map<Kind, Map<string, K8sObject>>();
  readonly #removeListeners: Listener[] = [];
  readonly #insertListeners: Listener[] = [];
  readonly changes: ChangeLog;

  /** `watchHistory`: changes kept per kind for watches that resume from a resourceVersion. */
  constructor(watchHistory = 1000) {
    this.changes = new ChangeLog(watchHistory, START_RV);
  }

  get resourceVersion(): string {
    return String(this.#rv);
  }

  #map(kind: Kind): Map<string, K8sObject> {
    let m = this.#objects.get(kind);
    if (!m) this.#objects.set(kind, (m = new Map()));
    return m;
  }

  get(kind: Kind, namespace: string, name: string): K8sObject | undefined {
    const obj = this.#map(kind).get(keyOf(namespace, name));
    return obj && structuredClone(obj);
  }

  /** Every object of a kind (in one namespace, or all), in key order as etcd lists them. */
  list(kind: Kind, namespace?: string): K8sObject[] {
    return [...this.#map(kind).entries()]
      .filter(([, o]) => namespace === undefined || o.metadata.namespace === namespace)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, o]) => structuredClone(o));
  }

  findByUid(uid: string): { kind: Kind; obj: K8sObject } | undefined {
    for (const [kind, m] of this.#objects) {
      for (const obj of m.values()) if (obj.metadata.uid === uid) return { kind, obj: structuredClone(obj) };
    }
    return undefined;
  }

  /** Stores a new object, giving it uid, resourceVersion and creationTimestamp; the caller checked the name is free. */
  insert(kind: Kind, obj: K8sObject): K8sObject {
    const stored = structuredClone(obj);
    stored.metadata.uid = randomUUID();
    stored.metadata.resourceVersion = String(++this.#rv);
    stored.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    this.#map(kind).set(keyOf(stored.metadata.namespace!, stored.metadata.name!), stored);
    this.changes.record({ type: 'ADDED', kind, rv: this.#rv, object: structuredClone(stored) });
    for (const l of this.#insertListeners) l(kind, structuredClone(stored));
    return structuredClone(stored);
  }

  /**
   * Changes a stored object in place and bumps its resourceVersion; undefined when it is gone. A change that leaves
   * the object as it was writes nothing and keeps its resourceVersion, as etcd's guaranteed update skips a no-op.
   */
  update(kind: Kind, namespace: string, name: string, change: (obj: K8sObject) => void): K8sObject | undefined {
    const obj = this.#map(kind).get(keyOf(namespace, name));
    if (!obj) return undefined;
    const previous = structuredClone(obj);
    change(obj);
    if (JSON.stringify(obj) === JSON.stringify(previous)) return structuredClone(obj);
    obj.metadata.resourceVersion = String(++this.#rv);
    this.changes.record({ type: 'MODIFIED', kind, rv: this.#rv, object: structuredClone(obj), previous });
    return structuredClone(obj);
  }

  /** Takes an object out for good and tells the listeners (the garbage collector). */
  remove(kind: Kind, namespace: string, name: string): K8sObject | undefined {
    const m = this.#map(kind);
    const obj = m.get(keyOf(namespace, name));
    if (!obj) return undefined;
    m.delete(keyOf(namespace, name));
    const rv = ++this.#rv;
    const last = structuredClone(obj);
    const object = { ...last, metadata: { ...last.metadata, resourceVersion: String(rv) } };
    this.changes.record({ type: 'DELETED', kind, rv, object, previous: last });
    for (const l of this.#removeListeners) l(kind, obj);
    return structuredClone(obj);
  }

  onRemove(listener: Listener): void {
    this.#removeListeners.push(listener);
  }

  onInsert(listener: Listener): void {
    this.#insertListeners.push(listener);
  }
}
