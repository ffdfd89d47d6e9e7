import type Dockerode from 'dockerode';
import type { EventRecorder } from './events.ts';
import type { PausePool } from './pod-sandbox.ts';
import type { Scenarios } from './scenarios.ts';
import type { Store } from './store.ts';

/** What every Pod's kubelet loop shares: the engine, the API objects, and this double's node settings. */
export interface NodeContext {
  docker: Dockerode;
  store: Store;
  events: EventRecorder;
  scenarios: Scenarios;
  doubleId: string;
  nodeName: string;
  /** The Docker network Pods join, and the host's address on it (the node's IP as Pods see it). */
  network: { name: string; hostIP: string };
  /** Where the API server listens, for the KUBERNETES_SERVICE_* variables every container gets. */
  apiServer: { host: string; port: number };
  settings: NodeSettings;
  /** Pod network sandboxes, made ahead of time (see PausePool). */
  pauses: PausePool;
  /** Docker runtimes the engine offers (runc, runsc, ...). */
  runtimes(): Promise<Set<string>>;
}

export interface NodeSettings {
  /** Image of the container that holds each Pod's network namespace. Default: the runtime image. */
  pauseImage: string;
  /** RuntimeClass name → Docker runtime (handler). Default `{ gvisor: 'runsc' }`. */
  runtimeClasses: Record<string, string>;
  /** Between two tries of a container the kubelet cannot start yet (pull, config, missing Secret). Default 1000. */
  retryMs: number;
  /** How often the eviction manager measures emptyDir usage. Default 250 (a kubelet's housekeeping is 10 s). */
  evictionIntervalMs: number;
  /** Per-container pids limit, as the kubelet's --pod-max-pids. Default 4096. */
  podPidsLimit: number | undefined;
  /** Network sandboxes kept ready for the next Pods (0: each made for its Pod, hostname = Pod name). Default 2. */
  warmSandboxes: number;
  /** containerLogMaxSize: past it, pods/log serves only the newest "file". Default 10 MiB. */
  containerLogMaxBytes: number;
  /**
   * The kubelet's restart back-off (restartPolicy OnFailure/Always): the wait before the second restart, doubling
   * after each. Default 10 000 ms, as on a node.
   */
  restartBackOffMs: number;
  /** The longest restart back-off. Default 30 × restartBackOffMs (5 min for the default 10 s). */
  restartBackOffMaxMs: number;
}
