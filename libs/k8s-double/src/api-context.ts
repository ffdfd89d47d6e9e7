import type { Readable } from 'node:stream';
import type { PodSecurityLevel } from './admission.ts';
import type { PodWorker } from './kubelet.ts';
import type { LogView } from './pod-logs.ts';
import type { NodeContext } from './node-context.ts';
import type { K8sObject, Kind, Store } from './store.ts';

/** What the resource handlers share: the store, the node, the Pods' kubelet loops and the cluster's policies. */
export interface ApiContext {
  store: Store;
  node: NodeContext;
  workers: Map<string, PodWorker>;
  namespaces: Set<string>;
  podSecurity: PodSecurityLevel;
  quota: { pods?: number };
  logView: LogView;
  /** Continue tokens minted at resourceVersions below this answer 410 Expired. */
  continueExpiredBefore: number;
  /** How often a watch that allows bookmarks gets one. */
  watchBookmarkMs: number;
  /** Removes an object for good, as the registry does after the last finalizer/grace; the GC follows. */
  removeNow(kind: Kind, namespace: string, name: string): K8sObject | undefined;
}

/** A parsed request for one resource handler. */
export interface ApiRequest {
  method: string;
  namespace?: string;
  name?: string;
  subresource?: string;
  query: URLSearchParams;
  body: unknown;
}

export interface ApiAnswer {
  status: number;
  body: unknown;
  contentType?: string;
  /** A body sent as it comes (a watch, a followed log) instead of `body`; destroyed when the client goes away. */
  stream?: Readable;
}
