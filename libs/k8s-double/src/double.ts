import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import Dockerode from 'dockerode';
import type { PodSecurityLevel, PolicyRule } from './admission.ts';
import type { ApiContext } from './api-context.ts';
import { DOUBLE_LABELS } from './docker-labels.ts';
import { EventRecorder } from './events.ts';
import { Faults } from './faults.ts';
import type { PodWorker } from './kubelet.ts';
import { kubeconfigFor, kubeconfigYaml, type KubeConfigObject } from './kubeconfig.ts';
import type { NodeContext, NodeSettings } from './node-context.ts';
import { nanos } from './log-entries.ts';
import { Scenarios } from './scenarios.ts';
import { createApiServer, type ApiCall } from './server.ts';
import { Store, type K8sObject, type Kind } from './store.ts';
import { GarbageCollector } from './gc.ts';
import { OpenStreams } from './open-streams.ts';
import { PausePool } from './pod-sandbox.ts';
import { removePodVolume } from './pod-volumes.ts';
import { fenceChain, HostFence, removeFence } from './host-fence.ts';

export interface K8sDoubleOptions {
  docker?: Dockerode;
  /** Namespaces that exist; creating in another is a 404. Default `['sandgate']`. */
  namespaces?: string[];
  /** Bearer token the API server accepts. Default: random. */
  token?: string;
  /** Pod Security Standards level enforced on every namespace. Default `restricted`. */
  podSecurity?: PodSecurityLevel;
  /** Authorise every request against these Role rules as `user` (403 otherwise). Default: everything allowed. */
  rbac?: { user: string; rules: PolicyRule[] };
  /** A ResourceQuota on the count of non-terminal Pods per namespace. */
  quota?: { pods?: number };
  node?: Partial<NodeSettings>;
  /**
   * TCP ports on this host the Pods may reach (e.g. the gateway that stage and harvest talk to); everything else on
   * the host is dropped, as the chart's NetworkPolicy drops it. More can be allowed later with allowHostPort().
   */
  hostPorts?: number[];
  /** How long the garbage collector waits before removing an object whose owners never existed. Default 500 ms. */
  orphanGraceMs?: number;
  /**
   * Changes kept per kind for watches that resume from a resourceVersion; resuming from before the oldest kept one
   * is 410 Expired, as after the watch cache moved on. Default 1000.
   */
  watchHistory?: number;
  /** How often a watch with allowWatchBookmarks gets a BOOKMARK (the watch cache's ~1 min). Default 60 000 ms. */
  watchBookmarkMs?: number;
}

const DEFAULT_SETTINGS: NodeSettings = {
  pauseImage: 'sandgate/runtime:1',
  runtimeClasses: { gvisor: 'runsc' },
  retryMs: 1000,
  evictionIntervalMs: 250,
  podPidsLimit: 4096,
  containerLogMaxBytes: 10 << 20,
  warmSandboxes: 2,
  restartBackOffMs: 10_000,
  restartBackOffMaxMs: 300_000,
};

/**
 * A Kubernetes API server (core/v1 pods, pods/log, secrets, events, with watches) on loopback whose Pods really run
 * on Docker. Start one per test with `K8sDouble.start()`, point a client at `kubeconfig`, and `close()` it afterwards:
 * every Docker object it made (labelled org.sandgate.k8s-double=<id>) goes with it.
 */
export class K8sDouble {
  readonly id = randomBytes(4).toString('hex');
  readonly calls: ApiCall[] = [];
  readonly faults = new Faults();
  readonly scenarios = new Scenarios();
  readonly store: Store;
  /** Watches and followed logs still streaming: `size`, and `idle()` to wait for the last to end. */
  readonly streams = new OpenStreams();
  readonly docker: Dockerode;
  readonly token: string;
  readonly namespace: string;
  url = '';
  kubeconfig!: KubeConfigObject;
  /** The host's address on the Pods' network: where a Pod reaches a server on this machine. */
  hostIP = '';
  readonly #workers = new Map<string, PodWorker>();
  #ctx!: ApiContext;
  #server?: Server;
  #sockets = new Set<Socket>();
  #network = '';
  #runtimes?: Promise<Set<string>>;
  #fence?: HostFence;
  #pauses?: PausePool;
  #gc?: GarbageCollector;

  private constructor(readonly options: K8sDoubleOptions) {
    this.store = new Store(options.watchHistory);
    this.docker = options.docker ?? new Dockerode();
    this.token = options.token ?? randomBytes(16).toString('hex');
    this.namespace = (options.namespaces ?? ['sandgate'])[0]!;
  }

  static async start(options: K8sDoubleOptions = {}): Promise<K8sDouble> {
    const d = new K8sDouble(options);
    try {
      await d.#start();
    } catch (err) {
      await d.close().catch(() => {});
      throw err;
    }
    return d;
  }

  async #start(): Promise<void> {
    this.#network = `k8sd-${this.id}`;
    // internal: Pods get an address the host reaches, and no route beyond the host (see docs/kubernetes.md). No
    // inter-container traffic: Pods reach neither each other nor a session Pod's agent, as the chart's NetworkPolicies
    // admit only the workers (on this host) to it.
    const net = await this.docker.createNetwork({
      Name: this.#network,
      Driver: 'bridge',
      Internal: true,
      Options: { 'com.docker.network.bridge.enable_icc': 'false' },
      Labels: { [DOUBLE_LABELS.double]: this.id },
    });
    const info = await net.inspect();
    this.hostIP = (info.IPAM?.Config ?? []).map((c: { Gateway?: string }) => c.Gateway).find(Boolean) ?? '';
    const bridge =
      (info.Options as Record<string, string> | undefined)?.['com.docker.network.bridge.name'] ??
      `br-${String(info.Id).slice(0, 12)}`;
    this.#fence = await HostFence.install(this.id, bridge);
    for (const port of this.options.hostPorts ?? []) await this.#fence.allow(port);
    const settings = { ...DEFAULT_SETTINGS, ...this.options.node };
    settings.restartBackOffMaxMs = this.options.node?.restartBackOffMaxMs ?? 30 * settings.restartBackOffMs;
    const node: NodeContext = {
      pauses: undefined as unknown as PausePool,
      docker: this.docker,
      store: this.store,
      events: new EventRecorder(this.store, 'k8s-double-node'),
      scenarios: this.scenarios,
      doubleId: this.id,
      nodeName: 'k8s-double-node',
      network: { name: this.#network, hostIP: this.hostIP },
      apiServer: { host: this.hostIP, port: 0 },
      settings,
      runtimes: () =>
        (this.#runtimes ??= this.docker
          .info()
          .then((i: { Runtimes?: Record<string, unknown> }) => new Set(Object.keys(i.Runtimes ?? {})))),
    };
    node.pauses = new PausePool(node, settings.warmSandboxes);
    this.#pauses = node.pauses;
    this.#ctx = {
      store: this.store,
      node,
      workers: this.#workers,
      namespaces: new Set(this.options.namespaces ?? ['sandgate']),
      podSecurity: this.options.podSecurity ?? 'restricted',
      quota: this.options.quota ?? {},
      logView: { rotatedAt: new Map(), lagMs: 0, maxFileBytes: settings.containerLogMaxBytes },
      continueExpiredBefore: 0,
      watchBookmarkMs: this.options.watchBookmarkMs ?? 60_000,
      removeNow: (kind, ns, name) => this.store.remove(kind, ns, name),
    };
    Object.defineProperty(this.#ctx.logView, 'lagMs', { get: () => this.scenarios.logLagMs });
    this.#gc = new GarbageCollector(this.store, this.#workers, this.options.orphanGraceMs ?? 500);
    const { server, sockets } = createApiServer(this.#ctx, {
      token: this.token,
      faults: this.faults,
      calls: this.calls,
      streams: this.streams,
      ...(this.options.rbac ? { rbac: this.options.rbac } : {}),
    });
    this.#server = server;
    this.#sockets = sockets;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    node.apiServer.port = port;
    this.url = `http://127.0.0.1:${port}`;
    this.kubeconfig = kubeconfigFor(this.url, this.token, this.namespace);
  }

  /** Lets the Pods reach this TCP port on the host from now on (see K8sDoubleOptions.hostPorts). */
  async allowHostPort(port: number): Promise<void> {
    await this.#fence!.allow(port);
  }

  /** The kubeconfig as a file's text, for a process that reads KUBECONFIG. */
  kubeconfigYaml(): string {
    return kubeconfigYaml(this.kubeconfig);
  }

  /** `verb resource[/subresource]` of every call so far, deduplicated and sorted: the verbs a backend used. */
  verbs(): string[] {
    return [
      ...new Set(
        this.calls
          .filter((c) => c.resource)
          .map((c) => `${c.verb} ${c.resource}${c.subresource ? `/${c.subresource}` : ''}`),
      ),
    ].sort();
  }

  #worker(namespace: string, name: string): PodWorker {
    const pod = this.store.get('Pod', namespace, name);
    const w = pod && this.#workers.get(pod.metadata.uid!);
    if (!w) throw new Error(`k8s-double: no running Pod ${namespace}/${name}`);
    return w;
  }

  /** The eviction manager evicts the Pod now, with the emptyDir message or another. */
  evict(namespace: string, name: string, message = 'The node was low on resource: ephemeral-storage. '): Promise<void> {
    return this.#worker(namespace, name).kill('evict', message);
  }

  /** Graceful node shutdown: the Pod fails with reason Terminated. */
  shutdownNode(namespace: string, name: string): Promise<void> {
    return this.#worker(namespace, name).kill('shutdown', 'Pod was terminated in response to imminent node shutdown.');
  }

  /** The Pod's node stops reporting: status frozen as it is, pods/log answers 500. */
  loseNode(namespace: string, name: string): Promise<void> {
    return this.#worker(namespace, name).lose();
  }

  /** The container's log file rotates now: pods/log serves only what is written after this. */
  rotateLogs(namespace: string, name: string, container: string): void {
    const w = this.#worker(namespace, name);
    const now = new Date().toISOString().replace(/(\.\d{3})Z$/, '$1999999Z');
    this.#ctx.logView.rotatedAt.set(`${w.ref.uid}/${container}`, nanos(now));
  }

  /** Someone else (kubectl, a controller) deletes the Pod at once: it is not one of the recorded calls. */
  deleteExternally(kind: Kind, namespace: string, name: string): void {
    this.store.remove(kind, namespace, name);
  }

  /** Continue tokens handed out so far answer 410 Expired, as after an etcd compaction. */
  expireContinueTokens(): void {
    this.#ctx.continueExpiredBefore = Number(this.store.resourceVersion) + 1;
  }

  /** Edits a stored object directly (e.g. strip an annotation or a finishedAt), bypassing the API. */
  mutate(kind: Kind, namespace: string, name: string, change: (obj: K8sObject) => void): K8sObject | undefined {
    return this.store.update(kind, namespace, name, change);
  }

  /** Resolves when every Pod's Docker objects are gone (after deletes, which clean up in the background). */
  async settled(): Promise<void> {
    await Promise.all(this.#gc?.teardowns ?? []);
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    if (this.#server) await new Promise((r) => this.#server!.close(r));
    await this.#pauses?.close();
    await Promise.all([...this.#workers.values()].map((w) => w.destroy()));
    await this.settled();
    await this.#fence?.remove();
    await removeDoubleObjects(this.docker, this.id);
  }
}

/**
 * Removes every Docker object labelled as made by one double (or by any, without an id), and its host fence:
 * the sweeper for a double whose process died before close().
 */
export async function removeDoubleObjects(docker: Dockerode, id?: string): Promise<void> {
  const label = id === undefined ? DOUBLE_LABELS.double : `${DOUBLE_LABELS.double}=${id}`;
  if (id !== undefined) await removeFence(fenceChain(id));
  const containers = await docker.listContainers({ all: true, filters: { label: [label] } });
  await Promise.all(
    containers.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => {}),
    ),
  );
  const { Volumes = [] } = await docker.listVolumes({ filters: { label: [label] } });
  await Promise.all(Volumes.map((v) => removePodVolume(docker, { dockerVolume: v.Name, hostPath: v.Mountpoint })));
  const networks = await docker.listNetworks({ filters: { label: [label] } });
  await Promise.all(
    networks.map((n) =>
      docker
        .getNetwork(n.Id)
        .remove()
        .catch(() => {}),
    ),
  );
}
