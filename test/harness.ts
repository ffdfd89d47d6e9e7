import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import Dockerode from 'dockerode';
import { buildApp, createGatewayDeps, startWebhookDispatcher, type GatewayDeps } from '@sandgate/gateway';
import { createBackend, newWorkerId, startWorker, type RunningWorker } from '@sandgate/worker';
import type { BackendName, ExecutionBackend } from '@sandgate/backends';
import { podName } from '@sandgate/backends/testing';
import type { NamespaceOptions, TestNamespace } from './kubernetes/cluster.ts';
import { createLogger, loadConfig, type Config } from '@sandgate/config';
import { openWorkspaces, SubvolumeQuota, type Workspaces } from '@sandgate/storage';
import { deleteKeys, freePort, REDIS_URL } from './redis-and-ports.ts';
import { SpecCheck } from './spec-check.ts';

export interface Stack {
  url: string;
  config: Config;
  env: Record<string, string>;
  deps: GatewayDeps;
  worker: RunningWorker | null;
  /** The stack's namespace on the test cluster, where its workers run their Pods (backend kubernetes only). */
  cluster?: TestNamespace;
  /**
   * Whether the sandbox of a run is still there: on Docker the container named by the hostname the code printed
   * (its short id), on Kubernetes the execution's own Pod or the pool Pod at the IP the code printed.
   */
  sandboxExists(run: { hostname: string; ip?: string; executionId: string }): Promise<boolean>;
  /** The id of a session's long-lived sandbox (container id on Docker, Pod uid on Kubernetes), if it has one. */
  sessionSandbox(sessionId: string): Promise<string | undefined>;
  /** Removes a session's sandbox behind sandgate's back (docker rm -f; a Pod deleted by someone else). */
  removeSessionSandbox(sessionId: string): Promise<void>;
  /** How many sandboxes (containers on Docker, Pods on Kubernetes) carry this execution's label. */
  sandboxesOf(executionId: string): Promise<number>;
  /** JSON request with the stack's default API key (if any). */
  api(
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any; headers: Headers }>;
  /**
   * Starts a worker in this process: on the stack's backend, or on `backend` (e.g. test/noop-backend.ts); `env`
   * overrides the stack's for this worker alone (e.g. SANDGATE_DOCKER_SOCKET: an engine that is not there).
   */
  startWorker(backend?: ExecutionBackend, env?: Record<string, string>): Promise<RunningWorker>;
  /** Stops delivering webhooks from this stack (as a gateway that stops would). */
  stopWebhooks(): Promise<void>;
  /** Resolves once every worker's warm pool is full, so that the next one-shot surely gets a pool sandbox. */
  poolReady(): Promise<void>;
  close(): Promise<void>;
}

export interface StackOptions {
  env?: Record<string, string>;
  /** Start an in-process worker: with the Docker backend (true, the default), or with the backend given. */
  worker?: boolean | ExecutionBackend;
  /** Bearer key sent by `api()` by default. */
  apiKey?: string;
  heartbeatMs?: number;
  /**
   * The backend of the stack's workers: `docker`, or `kubernetes` on the test cluster (scripts/start-kube.sh: the
   * real API server and kubelet), in a namespace of the stack's own. Default: SANDGATE_TEST_BACKEND, else docker.
   */
  backend?: BackendName;
  /** Options of the stack's namespace on the test cluster (backend kubernetes). */
  cluster?: NamespaceOptions;
  /**
   * Make the data directory on the quick start's data disk (QUOTA_DATA_PARENT: btrfs with quotas, as scripts/setup.sh
   * makes it), so that every session is a subvolume with a disk quota, as in a deployment made by the quick start.
   */
  diskQuotas?: boolean;
}

/** The data directory scripts/setup.sh makes: on btrfs with quotas on. */
export const QUOTA_DATA_PARENT = '/var/lib/sandgate';

async function dataParent(diskQuotas: boolean): Promise<string> {
  if (!diskQuotas) return tmpdir();
  const quota = await SubvolumeQuota.forDataDir(QUOTA_DATA_PARENT, 1 << 20).catch((e: Error) => ({
    unavailable: e.message,
  }));
  if ('unavailable' in quota) {
    throw new Error(`no disk quotas under ${QUOTA_DATA_PARENT} (${quota.unavailable}): run bash scripts/setup.sh`);
  }
  return QUOTA_DATA_PARENT;
}

/** The backend end-to-end tests run on: the whole suite runs once per backend (scripts/run-tests.sh). */
export const TEST_BACKEND: BackendName = process.env.SANDGATE_TEST_BACKEND === 'kubernetes' ? 'kubernetes' : 'docker';

/** The share of its CPU limit a test sandbox Pod requests: 10m of 1 CPU. */
export const TEST_CPU_REQUEST_RATIO = '0.01';

/** A namespace on the test cluster for a stack whose gateway listens on `port` (on every address: Pods reach it). */
async function kubernetesFor(
  port: number,
  dataDir: string,
  options: StackOptions['cluster'],
): Promise<{ namespace: TestNamespace; env: Record<string, string>; close(): Promise<void> }> {
  // Loaded here: a test on Docker should not pay for the Kubernetes client.
  const { TestNamespace } = await import('./kubernetes/cluster.ts');
  const namespace = await TestNamespace.create({ ...options, hostPorts: [port], dir: join(dataDir, '..') });
  return {
    namespace,
    env: {
      SANDGATE_BACKEND: 'kubernetes',
      SANDGATE_K8S_NAMESPACE: namespace.name,
      SANDGATE_K8S_KUBECONFIG: namespace.kubeconfigFile,
      SANDGATE_K8S_GATEWAY_URL: `http://${namespace.hostIP}:${port}`,
      SANDGATE_HOST: '0.0.0.0',
      SANDGATE_PUBLIC_URL: `http://127.0.0.1:${port}`,
      // The scheduler places no more Pods on a node than their CPU requests fit: the test node has 2 cores and the
      // tests keep dozens of sandboxes (pools, sessions, runs of two files) at once, each limited to 1 CPU.
      SANDGATE_K8S_CPU_REQUEST_RATIO: TEST_CPU_REQUEST_RATIO,
    },
    close: () => namespace.close(),
  };
}

/** A whole sandgate on loopback: real Redis (own key prefix), real HTTP, optionally a real worker on Docker. */
export async function startStack({
  env = {},
  worker = true,
  apiKey,
  heartbeatMs,
  backend = TEST_BACKEND,
  cluster: clusterOptions,
  diskQuotas = false,
}: StackOptions = {}): Promise<Stack> {
  const prefix = `sgtest${randomBytes(4).toString('hex')}`;
  const dataDir = await mkdtemp(join(await dataParent(diskQuotas), 'sandgate-test-'));
  const port = await freePort();
  const cluster = backend === 'kubernetes' ? await kubernetesFor(port, dataDir, clusterOptions) : undefined;
  const fullEnv: Record<string, string> = {
    REDIS_URL,
    SANDGATE_REDIS_PREFIX: prefix,
    SANDGATE_DATA_DIR: dataDir,
    SANDGATE_PORT: String(port),
    SANDGATE_LOG_LEVEL: process.env.SANDGATE_TEST_LOG_LEVEL ?? 'silent',
    SANDGATE_SWEEP_INTERVAL_S: '2',
    SANDGATE_LEASE_MS: '3000',
    // The runtime image a test run built for itself (images/runtime/build.sh honours the same variable).
    ...(process.env.SANDGATE_IMAGE ? { SANDGATE_IMAGE: process.env.SANDGATE_IMAGE } : {}),
    ...cluster?.env,
    ...env,
  };
  const config = loadConfig(fullEnv);
  const log = createLogger(config, 'sandgate-test', { tty: false });
  const deps = await createGatewayDeps(config, log);
  // The stack holds its webhook dispatcher itself, so that a test can stop it as a gateway's end would.
  const app = await buildApp(deps, { webhooks: false, ...(heartbeatMs ? { heartbeatMs } : {}) });
  let webhooks = config.webhookAllow.length > 0 ? startWebhookDispatcher(deps, log) : null;
  const spec = watchSpec(app);
  // A cluster's Pods reach the gateway on the host's address on their network, not on loopback.
  await app.listen({ host: cluster ? '0.0.0.0' : '127.0.0.1', port });
  const url = `http://127.0.0.1:${port}`;
  const workers: RunningWorker[] = [];
  const backends: ExecutionBackend[] = [];
  const opened: Workspaces[] = [];
  const stack: Stack = {
    url,
    config,
    deps,
    env: fullEnv,
    worker: null,
    ...(cluster ? { cluster: cluster.namespace } : {}),
    async sandboxExists({ hostname, ip, executionId }) {
      if (cluster) {
        // Its own Pod, or the warm pool Pod it ran in.
        const pods = await cluster.namespace.pods();
        return pods.some((p) => p.metadata?.name === podName(executionId) || (ip && p.status?.podIP === ip));
      }
      return new Dockerode()
        .getContainer(hostname)
        .inspect()
        .then(
          () => true,
          () => false,
        );
    },
    async sessionSandbox(sessionId) {
      if (cluster) {
        const pods = await cluster.namespace.pods(`org.sandgate.session=${sessionId},org.sandgate.kind=session`);
        return pods[0]?.metadata?.uid;
      }
      const label = [`org.sandgate.session=${sessionId}`, 'org.sandgate.kind=session'];
      return (await new Dockerode().listContainers({ all: true, filters: { label } }))[0]?.Id;
    },
    async removeSessionSandbox(sessionId) {
      if (cluster) {
        for (const pod of await cluster.namespace.pods(`org.sandgate.session=${sessionId}`)) {
          await cluster.namespace.deletePod(pod.metadata!.name!);
        }
        return;
      }
      const id = await this.sessionSandbox(sessionId);
      if (id) await new Dockerode().getContainer(id).remove({ force: true });
    },
    async sandboxesOf(executionId) {
      if (cluster) return (await cluster.namespace.pods(`org.sandgate.execution=${executionId}`)).length;
      const label = `org.sandgate.execution=${executionId}`;
      return (await new Dockerode().listContainers({ all: true, filters: { label: [label] } })).length;
    },
    async api(method, path, body, headers = {}) {
      const h: Record<string, string> = { ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}), ...headers };
      if (body !== undefined) h['content-type'] ??= 'application/json';
      const res = await fetch(url + path, {
        method,
        headers: h,
        ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        /* not JSON */
      }
      return { status: res.status, body: parsed, headers: res.headers };
    },
    async startWorker(given, env) {
      const own = env ? loadConfig({ ...fullEnv, ...env }) : config;
      // As a worker process opens them: with per-session disk quotas where the data directory has them.
      const workspaces = await openWorkspaces({
        dataDir,
        owner: { uid: config.sandboxUid, gid: config.sandboxUid },
        sessionDiskBytes: config.sessionDiskBytes,
        warn: () => {},
      });
      opened.push(workspaces);
      const id = newWorkerId();
      const backend = given ?? (await createBackend(own, log, workspaces, id));
      const w = await startWorker({ config: own, log, backend, workspaces, id, heartbeatMs: 1000 });
      backends.push(backend);
      workers.push(w);
      stack.worker ??= w;
      return w;
    },
    async stopWebhooks() {
      await webhooks?.close();
      webhooks = null;
    },
    async poolReady() {
      await Promise.all(backends.map((b) => b.poolReady?.()));
    },
    async close() {
      await app.close();
      await stack.stopWebhooks();
      const mismatches = await spec.mismatches();
      for (const w of workers) await w.close();
      for (const b of backends) await b.close();
      for (const w of opened) await w.close();
      // Session sandboxes outlive workers by design; a test stack takes its whole deployment with it.
      const docker = new Dockerode();
      const mine = await docker.listContainers({
        all: true,
        filters: { label: [`org.sandgate.deployment=${prefix}`] },
      });
      await Promise.all(
        mine.map((c) =>
          docker
            .getContainer(c.Id)
            .remove({ force: true })
            .catch(() => {}),
        ),
      );
      await deleteKeys(prefix);
      await deps.close();
      await cluster?.close();
      await removeCopies(dataDir, config);
      await rm(dataDir, { recursive: true, force: true });
      assert.deepEqual(mismatches, [], 'every request and response of this stack matches openapi/openapi.json');
    },
  };
  if (worker) await stack.startWorker(worker === true ? undefined : worker);
  return stack;
}

/**
 * Removes the copies sessions left (snapshots, undo steps), as deleting each session would: on btrfs they are
 * read-only subvolumes, which a recursive rm cannot empty.
 */
async function removeCopies(dataDir: string, config: Config): Promise<void> {
  const ids = new Set<string>();
  for (const kind of ['undo', 'snapshots']) {
    for (const id of await readdir(join(dataDir, kind)).catch(() => [] as string[])) ids.add(id);
  }
  if (ids.size === 0) return;
  const workspaces = await openWorkspaces({
    dataDir,
    owner: { uid: config.sandboxUid, gid: config.sandboxUid },
    sessionDiskBytes: config.sessionDiskBytes,
    warn: () => {},
  });
  for (const id of ids) await workspaces.remove(id).catch(() => {});
  await workspaces.close();
}

/**
 * Checks every exchange of the app's HTTP traffic against openapi/openapi.json (test/spec-check.ts), so every test
 * that drives a stack also tests the document. Hijacked replies (SSE streams, MCP) are not seen here.
 */
function watchSpec(app: Awaited<ReturnType<typeof buildApp>>) {
  const check = new SpecCheck();
  const found: Promise<string[]>[] = [];
  app.addHook('onSend', async (req, reply, payload) => {
    const type = reply.getHeader('content-type');
    found.push(
      check.check({
        method: req.method,
        url: req.url,
        headers: req.headers,
        body: req.body,
        status: reply.statusCode,
        contentType: type === undefined ? undefined : String(type),
        payload: typeof payload === 'string' ? payload : undefined,
      }),
    );
    return payload;
  });
  return { mismatches: async () => (await Promise.all(found)).flat() };
}

/** Polls `check` until it returns a truthy value or `timeoutMs` passes (then throws with `what`). */
export async function until<T>(
  what: string,
  check: () => Promise<T | null | undefined | false>,
  timeoutMs = 20_000,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
