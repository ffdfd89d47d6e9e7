/**
 * The real Kubernetes the Kubernetes tests run against: kube-apiserver, etcd, the controller manager, the scheduler
 * and a kubelet on this machine (scripts/start-kube.sh). Each test stack gets a namespace of its own, labelled for
 * Pod Security `restricted`, with the chart's worker ServiceAccount and RBAC as `helm template` renders them, and
 * a kubeconfig with a real token for that ServiceAccount: every call its workers make is authorized by the chart's
 * Role. The API server's audit log says which calls a stack's workers made.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import type { FaultProxy, Faults } from '@sandgate/k8s-double';
import { renderChart, type Manifest } from './helm.ts';

const run = promisify(execFile);
const iptables = (...args: string[]) => run('iptables', ['-w', '5', ...args]);
/** The node's chain of host ports its Pods may reach (scripts/kube-node.sh). */
const FENCE = 'SGKUBE-HOST';
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** What scripts/start-kube.sh prints: the admin's kubeconfig, the audit log, the Pods' way to this host. */
export interface KubeCluster {
  dir: string;
  adminKubeconfig: string;
  auditLog: string;
  /** This host's address on the Pods' bridge: where Pods reach a gateway listening on 0.0.0.0. */
  podGateway: string;
  admin: k8s.KubeConfig;
}

let started: Promise<KubeCluster> | undefined;

/**
 * The cluster, started by scripts/start-kube.sh when it is not running (npm run test:kubernetes starts it first and
 * passes its variables on, so a test process only checks that it answers).
 */
export function kubeCluster(): Promise<KubeCluster> {
  started ??= (async () => {
    // The variables npm run test:kubernetes passes on, or those a running cluster left in its directory.
    let env = pick(process.env);
    if (!env) {
      const saved = join(process.env.SANDGATE_KUBE_DIR ?? '/var/lib/sandgate-kube', 'env');
      env = pick(exportsOf(await readFile(saved, 'utf8').catch(() => '')));
    }
    if (!env || !(await answers(env.KUBECONFIG))) {
      const { stdout } = await run('bash', [join(ROOT, 'scripts', 'start-kube.sh')], { maxBuffer: 1 << 20 }).catch(
        (e: { stderr?: string; message: string }) => {
          throw new Error(`scripts/start-kube.sh failed: ${(e.stderr ?? e.message).slice(-4000)}`);
        },
      );
      env = pick(exportsOf(stdout));
      if (!env) throw new Error(`scripts/start-kube.sh printed no cluster: ${stdout}`);
    }
    const admin = new k8s.KubeConfig();
    admin.loadFromFile(env.KUBECONFIG);
    return {
      dir: env.SANDGATE_KUBE_DIR,
      adminKubeconfig: env.KUBECONFIG,
      auditLog: env.SANDGATE_KUBE_AUDIT_LOG,
      podGateway: env.SANDGATE_KUBE_POD_GATEWAY,
      admin,
    };
  })();
  return started;
}

const exportsOf = (text: string): Record<string, string> =>
  Object.fromEntries([...text.matchAll(/^export (\w+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]));

const VARS = ['KUBECONFIG', 'SANDGATE_KUBE_DIR', 'SANDGATE_KUBE_AUDIT_LOG', 'SANDGATE_KUBE_POD_GATEWAY'] as const;
function pick(env: Record<string, string | undefined>): Record<(typeof VARS)[number], string> | undefined {
  const out = Object.fromEntries(VARS.map((v) => [v, env[v]]));
  return VARS.every((v) => out[v]) ? (out as Record<(typeof VARS)[number], string>) : undefined;
}

async function answers(kubeconfig: string): Promise<boolean> {
  try {
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(kubeconfig);
    await kc.makeApiClient(k8s.VersionApi).getCode();
    return true;
  } catch {
    return false;
  }
}

const MARKER = 'audit-marker-';

/** One API request as the audit log records it. */
export interface ApiCall {
  verb: string;
  /** `pods`, `pods/log`, `secrets`, … */
  resource: string;
  name?: string;
  namespace?: string;
  query: Record<string, string>;
  status: number;
  uri: string;
}

/** How a stack's namespace differs from the default one. */
export interface NamespaceOptions {
  /**
   * TCP ports on this host the namespace's Pods may reach (the stack's gateway, for stage and harvest): the node's
   * firewall (scripts/kube-node.sh, chain SGKUBE-HOST) drops everything else they send to the host.
   */
  hostPorts?: number[];
  /**
   * Put a fault proxy (@sandgate/k8s-double) between the workers and the API server, so that a test can make the
   * API server answer 429, 5xx, reset or hang: `faults` then arms them. The kubeconfig points at the proxy.
   */
  faults?: boolean;
  labels?: Record<string, string>;
  /** e.g. scheduler.alpha.kubernetes.io/node-selector, which the PodNodeSelector admission plugin applies to Pods. */
  annotations?: Record<string, string>;
}

/** The chart's ServiceAccounts, Role and RoleBinding, rendered once per process by the real helm. */
let chartRbac: Promise<Manifest[]> | undefined;
const RBAC_PLACEHOLDER = 'sandgate-rbac-template';
const RELEASE = 'sg';
export const WORKER_SERVICE_ACCOUNT = `${RELEASE}-sandgate-worker`;

/**
 * A namespace of one test stack: Pod Security `restricted`, the chart's worker ServiceAccount, Role and RoleBinding,
 * and a kubeconfig for that ServiceAccount with a token the API server issued. `close()` deletes the namespace and
 * with it everything the stack made there.
 */
export class TestNamespace {
  readonly name: string;
  readonly user: string;
  readonly cluster: KubeCluster;
  /** The worker's kubeconfig, in the shape KubeConfig.loadFromOptions takes (through the fault proxy, if any). */
  readonly kubeconfig: KubeConfigObject;
  /** The fault proxy in front of the API server (option `faults`). */
  readonly proxy: FaultProxy | undefined;
  readonly kubeconfigFile: string;
  /** Core API as the cluster's admin: what a test looks at and does behind sandgate's back. */
  readonly core: k8s.CoreV1Api;
  readonly #auditStart: number;
  readonly #ports: number[] = [];
  /** The worker's kubeconfig straight to the API server, never through the proxy. */
  readonly #direct: KubeConfigObject;

  private constructor(
    cluster: KubeCluster,
    name: string,
    kubeconfig: KubeConfigObject,
    direct: KubeConfigObject,
    kubeconfigFile: string,
    auditStart: number,
    proxy: FaultProxy | undefined,
  ) {
    this.proxy = proxy;
    this.#direct = direct;
    this.cluster = cluster;
    this.name = name;
    this.user = `system:serviceaccount:${name}:${WORKER_SERVICE_ACCOUNT}`;
    this.kubeconfig = kubeconfig;
    this.kubeconfigFile = kubeconfigFile;
    this.core = cluster.admin.makeApiClient(k8s.CoreV1Api);
    this.#auditStart = auditStart;
  }

  /** The faults the proxy answers with (option `faults`). */
  get faults(): Faults {
    if (!this.proxy)
      throw new Error('this namespace has no fault proxy: start the stack with cluster: { faults: true }');
    return this.proxy.faults;
  }

  /** This host's address as the Pods reach it. */
  get hostIP(): string {
    return this.cluster.podGateway;
  }

  static async create(options: NamespaceOptions & { dir: string }): Promise<TestNamespace> {
    const cluster = await kubeCluster();
    const name = `sgtest-${randomBytes(4).toString('hex')}`;
    const auditStart = await stat(cluster.auditLog).then(
      (s) => s.size,
      () => 0,
    );
    const core = cluster.admin.makeApiClient(k8s.CoreV1Api);
    await core.createNamespace({
      body: {
        metadata: {
          name,
          labels: {
            'pod-security.kubernetes.io/enforce': 'restricted',
            'pod-security.kubernetes.io/enforce-version': 'latest',
            'org.sandgate.test': 'true',
            ...options.labels,
          },
          ...(options.annotations ? { annotations: options.annotations } : {}),
        },
      },
    });
    chartRbac ??= renderChart({
      values: { redis: { url: 'redis://unused:6379' } },
      name: RELEASE,
      namespace: RBAC_PLACEHOLDER,
      showOnly: ['templates/serviceaccounts.yaml', 'templates/rbac.yaml'],
    });
    const objects = k8s.KubernetesObjectApi.makeApiClient(cluster.admin);
    for (const m of await chartRbac) {
      // The chart rendered for a namespace named RBAC_PLACEHOLDER, now for this one.
      const body = JSON.parse(JSON.stringify(m).replaceAll(`"${RBAC_PLACEHOLDER}"`, JSON.stringify(name)));
      await objects.create(body);
    }
    // Pods name no ServiceAccount: admission needs the namespace's `default` one, which its controller makes.
    for (let i = 0; ; i++) {
      const found = await core.readNamespacedServiceAccount({ name: 'default', namespace: name }).then(
        () => true,
        () => false,
      );
      if (found) break;
      if (i > 200) throw new Error(`namespace ${name} got no default ServiceAccount`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const token = await core.createNamespacedServiceAccountToken({
      name: WORKER_SERVICE_ACCOUNT,
      namespace: name,
      body: { spec: { expirationSeconds: 6 * 3600, audiences: [] } },
    });
    const cfg = cluster.admin.getCurrentCluster()!;
    const user = `system:serviceaccount:${name}:${WORKER_SERVICE_ACCOUNT}`;
    const kubeconfig: KubeConfigObject = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'sandgate-kube', server: cfg.server, caData: cfg.caData! }],
      users: [{ name: user, token: token.status!.token! }],
      contexts: [{ name: 'worker', cluster: 'sandgate-kube', user, namespace: name }],
      currentContext: 'worker',
    };
    const proxy = options.faults
      ? await (await import('@sandgate/k8s-double')).FaultProxy.start({ server: cfg.server, caData: cfg.caData! })
      : undefined;
    const file = join(options.dir, `kubeconfig-${name}.yaml`);
    const worker = proxy ? proxy.kubeconfigFor(kubeconfig) : kubeconfig;
    await writeFile(file, kubeconfigYaml(worker), { mode: 0o600 });
    const ns = new TestNamespace(cluster, name, worker, kubeconfig, file, auditStart, proxy);
    for (const port of options.hostPorts ?? []) await ns.allowHostPort(port);
    return ns;
  }

  /** Every request the stack's workers (its ServiceAccount) made, in order, from the API server's audit log. */
  async calls(): Promise<ApiCall[]> {
    // A request of the same identity the test makes last: once the log has it, it has every request before it.
    const marker = `${MARKER}${randomBytes(4).toString('hex')}`;
    const worker = new k8s.KubeConfig();
    worker.loadFromOptions(this.#direct);
    await worker
      .makeApiClient(k8s.CoreV1Api)
      .readNamespacedPod({ name: marker, namespace: this.name })
      .catch(() => {});
    for (let i = 0; ; i++) {
      const all = await this.#read();
      const at = all.findIndex((c) => c.name === marker);
      // The markers of earlier looks are no call of the stack's.
      if (at >= 0) return all.slice(0, at).filter((c) => !c.name?.startsWith(MARKER));
      if (i > 100) throw new Error('the audit log did not record the marker request');
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async #read(): Promise<ApiCall[]> {
    const file = await open(this.cluster.auditLog, 'r');
    let text: string;
    try {
      const { size } = await file.stat();
      const buf = Buffer.alloc(Math.max(0, size - this.#auditStart));
      await file.read(buf, 0, buf.length, this.#auditStart);
      text = buf.toString('utf8');
    } finally {
      await file.close();
    }
    const calls: ApiCall[] = [];
    for (const line of text.split('\n')) {
      if (!line.includes(this.user)) continue;
      const e = JSON.parse(line) as AuditEvent;
      if (e.user.username !== this.user || e.stage !== 'ResponseComplete') continue;
      const url = new URL(e.requestURI, 'https://api');
      const ref = e.objectRef ?? {};
      calls.push({
        verb: e.verb,
        resource: ref.subresource ? `${ref.resource}/${ref.subresource}` : (ref.resource ?? url.pathname),
        ...(ref.name ? { name: ref.name } : {}),
        ...(ref.namespace ? { namespace: ref.namespace } : {}),
        query: Object.fromEntries(url.searchParams),
        status: e.responseStatus?.code ?? 0,
        uri: e.requestURI,
      });
    }
    return calls;
  }

  /** The namespace's Pods (as the admin sees them), optionally by label selector. */
  async pods(labelSelector?: string): Promise<k8s.V1Pod[]> {
    const list = await this.core.listNamespacedPod({
      namespace: this.name,
      ...(labelSelector ? { labelSelector } : {}),
    });
    return list.items;
  }

  /** Deletes a Pod behind sandgate's back, at once (grace 0), as an operator's `kubectl delete --force` does. */
  async deletePod(name: string): Promise<void> {
    await this.core.deleteNamespacedPod({ name, namespace: this.name, gracePeriodSeconds: 0 });
  }

  /** Lets the Pods reach this TCP port on the host (until close). */
  async allowHostPort(port: number): Promise<void> {
    await iptables('-I', FENCE, '2', ...this.#rule(port));
    this.#ports.push(port);
  }

  #rule(port: number): string[] {
    return ['-p', 'tcp', '--dport', String(port), '-m', 'comment', '--comment', this.name, '-j', 'ACCEPT'];
  }

  async close(): Promise<void> {
    for (const port of this.#ports) await iptables('-D', FENCE, ...this.#rule(port)).catch(() => {});
    await this.proxy?.close();
    await this.core.deleteNamespace({ name: this.name, propagationPolicy: 'Background' }).catch(() => {});
    await rm(this.kubeconfigFile, { force: true });
  }
}

interface AuditEvent {
  stage: string;
  verb: string;
  requestURI: string;
  user: { username: string };
  objectRef?: { resource?: string; subresource?: string; name?: string; namespace?: string };
  responseStatus?: { code?: number };
}

/** A one-cluster, one-user kubeconfig in the shape KubeConfig.loadFromOptions takes. */
export interface KubeConfigObject {
  apiVersion: 'v1';
  kind: 'Config';
  clusters: { name: string; server: string; caData?: string; skipTLSVerify?: boolean }[];
  users: { name: string; token: string }[];
  contexts: { name: string; cluster: string; user: string; namespace: string }[];
  currentContext: string;
}

/** The same kubeconfig as a file's YAML (whose field names differ from loadFromOptions'). JSON is YAML. */
function kubeconfigYaml(k: KubeConfigObject): string {
  const c = k.clusters[0]!;
  const x = k.contexts[0]!;
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: c.name,
        cluster: {
          server: c.server,
          ...(c.caData ? { 'certificate-authority-data': c.caData } : {}),
          ...(c.skipTLSVerify ? { 'insecure-skip-tls-verify': true } : {}),
        },
      },
    ],
    users: k.users.map((u) => ({ name: u.name, user: { token: u.token } })),
    contexts: [{ name: x.name, context: { cluster: x.cluster, user: x.user, namespace: x.namespace } }],
    'current-context': k.currentContext,
  });
}

/** The admin's kubeconfig file text for kubectl, e.g. in a test that drives it. */
export const adminKubeconfigText = async (): Promise<string> => readFile((await kubeCluster()).adminKubeconfig, 'utf8');
