/**
 * http-oneshot-k8s: the Kubernetes backend through a real sandgate (`npm start`'s standalone process) with
 * SANDGATE_BACKEND=kubernetes against the test cluster (scripts/start-kube.sh: the real kube-apiserver, scheduler and
 * kubelet with containerd), interleaved with the same runs through Docker-backend sandgates, so each ratio compares
 * the two:
 *
 * - one-shot, cold: a Pod of its own (stage, runner, harvest; SANDGATE_POOL_SIZE=0) vs the Docker cold path;
 * - one-shot, pool: a warm pool Pod, reset and reused for the tenant, vs the Docker warm pool;
 * - process-session run over HTTP: the session's Pod (files moved by the worker) vs the Docker session path;
 * - stateful run ("1+1" in the session's live interpreter), against 20 ms.
 *
 * And the API calls each kind of run costs (the API server's audit log has every request),
 * with the request rate one-shots make at 10 runs/s. The test cluster has no image pulls (the image is on the node).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestNamespace } from '../test/kubernetes/cluster.ts';
import { freePort } from '../test/redis-and-ports.ts';
import { createSession, deleteSession, runWait } from './lib/api.ts';
import { N, WARMUP } from './lib/knobs.ts';
import { main } from './lib/main.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, round, summarize } from './lib/stats.ts';

const BENCH = 'http-oneshot-k8s';
const TARGET =
  'cold one-shot p50 <= 1.3x the Docker cold path; session run p50 <= 1.5x the Docker session path; stateful p50 <= 20 ms';
const BODY = { language: 'python', code: 'print(1)' };
/** A session run reads a file the session holds: on Kubernetes stage fetches it into the Pod. */
const SESSION_BODY = { language: 'python', code: 'print(len(open("note.txt").read()) // 1000)' };
const LIMITS = { SANDGATE_MAX_SESSIONS: '100000', SANDGATE_LOG_LEVEL: 'warn' };
const COLD = { SANDGATE_POOL_SIZE: '0' };

/**
 * The gateway listens on loopback (open mode refuses anything else); Pods reach it through this TCP relay on the
 * host's address on their network, as they would reach a Service.
 */
async function relay(host: string, port: number, to: number): Promise<Server> {
  const server = createServer((socket) => {
    const upstream = connect(to, '127.0.0.1');
    socket.pipe(upstream).pipe(socket);
    const close = () => {
      socket.destroy();
      upstream.destroy();
    };
    socket.on('error', close);
    upstream.on('error', close);
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return server;
}

async function oneShot(stack: Stack): Promise<number> {
  const r = await runWait(stack, BODY, { wait: 60 });
  await deleteSession(stack, r.exec.session_id);
  return r.ms;
}

main(async () => {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-bench-k8s-'));
  let cluster: BenchCluster | null = null;
  const relays: Server[] = [];
  const stacks: Stack[] = [];
  try {
    const ports = [await freePort(), await freePort()];
    const relayPorts = [await freePort(), await freePort()];
    cluster = await onCluster(dir, relayPorts);
    const { kubeconfig } = cluster;
    const onK8s = async (i: number, env: Record<string, string>) => {
      relays.push(await relay(cluster!.hostIP, relayPorts[i]!, ports[i]!));
      const stack = await startStack(['standalone'], {
        ...LIMITS,
        ...env,
        SANDGATE_PORT: String(ports[i]),
        SANDGATE_BACKEND: 'kubernetes',
        SANDGATE_K8S_NAMESPACE: cluster!.namespace,
        SANDGATE_K8S_KUBECONFIG: kubeconfig,
        SANDGATE_K8S_GATEWAY_URL: `http://${cluster!.hostIP}:${relayPorts[i]}`,
        // Each Pod requests the CPU it is limited to: at 1 the 2-core test node holds two Pods at a time.
        SANDGATE_CPU_LIMIT: '0.2',
      });
      stacks.push(stack);
      return stack;
    };
    const onDocker = async (env: Record<string, string>) => {
      const stack = await startStack(['standalone'], { ...LIMITS, ...env });
      stacks.push(stack);
      return stack;
    };
    const k8sCold = await onK8s(0, COLD);
    const k8s = await onK8s(1, {});
    const dockerCold = await onDocker(COLD);
    const docker = await onDocker({});
    const sessions = {
      k8s: (await createSession(k8s, { mode: 'process' })).id,
      docker: (await createSession(docker, { mode: 'process' })).id,
      k8sStateful: (await createSession(k8s, { mode: 'stateful' })).id,
      dockerStateful: (await createSession(docker, { mode: 'stateful' })).id,
    };
    for (const [stack, id] of [
      [k8s, sessions.k8s],
      [docker, sessions.docker],
    ] as const) {
      const put = await fetch(`${stack.url}/v1/sessions/${id}/files/note.txt`, {
        method: 'PUT',
        headers: stack.headers,
        body: 'x'.repeat(1000),
      });
      if (put.status !== 201) throw new Error(`upload: ${put.status} ${await put.text()}`);
    }
    const session = (stack: Stack, id: string) => runWait(stack, { ...SESSION_BODY, session_id: id }, { wait: 60 });
    const stateful = async (stack: Stack, id: string) => {
      const r = await runWait(stack, { language: 'python', code: '1+1', session_id: id }, { expectStdout: null });
      if (r.exec.result.value !== '2') throw new Error(`stateful run: ${JSON.stringify(r.exec.result)}`);
      return r.ms;
    };
    for (let i = 0; i < WARMUP; i++) {
      await oneShot(k8sCold);
      await oneShot(dockerCold);
      await oneShot(k8s);
      await oneShot(docker);
      await session(k8s, sessions.k8s);
      await session(docker, sessions.docker);
      await stateful(k8s, sessions.k8sStateful);
      await stateful(docker, sessions.dockerStateful);
    }
    const kinds = ['k8sCold', 'dockerCold', 'k8sPool', 'dockerPool', 'k8sSession', 'dockerSession'] as const;
    const times = Object.fromEntries([...kinds, 'k8sStateful', 'dockerStateful'].map((k) => [k, [] as number[]]));
    const calls = { cold: 0, pool: 0, session: 0, stateful: 0 };
    const counted = async (what: keyof typeof calls, run: () => Promise<number>) => {
      const before = await cluster!.callCount();
      const ms = await run();
      calls[what] += (await cluster!.callCount()) - before;
      return ms;
    };
    for (let i = 0; i < N; i++) {
      times.k8sCold!.push(await counted('cold', () => oneShot(k8sCold)));
      times.dockerCold!.push(await oneShot(dockerCold));
      times.k8sPool!.push(await counted('pool', () => oneShot(k8s)));
      times.dockerPool!.push(await oneShot(docker));
      times.k8sSession!.push(await counted('session', async () => (await session(k8s, sessions.k8s)).ms));
      times.dockerSession!.push((await session(docker, sessions.docker)).ms);
      for (let j = 0; j < 3; j++) {
        times.k8sStateful!.push(await counted('stateful', () => stateful(k8s, sessions.k8sStateful)));
        times.dockerStateful!.push(await stateful(docker, sessions.dockerStateful));
      }
    }
    const p50 = (k: string) => summarize(times[k]!).p50_ms;
    const cold = summarize(times.k8sCold!);
    const ratio = cold.p50_ms / p50('dockerCold');
    const sessionRatio = p50('k8sSession') / p50('dockerSession');
    const statefulP50 = p50('k8sStateful');
    const perColdRun = calls.cold / N;
    emit({
      bench: BENCH,
      ...cold,
      docker_cold_p50_ms: p50('dockerCold'),
      pool_p50_ms: p50('k8sPool'),
      docker_pool_p50_ms: p50('dockerPool'),
      pool_ratio: round(p50('k8sPool') / p50('dockerPool'), 3),
      session_run_p50_ms: p50('k8sSession'),
      docker_session_p50_ms: p50('dockerSession'),
      session_ratio: round(sessionRatio, 3),
      stateful_p50_ms: statefulP50,
      docker_stateful_p50_ms: p50('dockerStateful'),
      api_calls_per_cold_oneshot: round(perColdRun, 1),
      api_calls_per_pool_oneshot: round(calls.pool / N, 1),
      api_calls_per_session_run: round(calls.session / N, 1),
      api_calls_per_stateful_run: round(calls.stateful / (N * 3), 1),
      api_requests_per_s_at_10_cold_runs_per_s: round(perColdRun * 10, 1),
      cluster: cluster.name,
      verbs: await cluster.verbs(),
      target: TARGET,
      ratio: round(ratio, 3),
      pass: ratio <= 1.3 && sessionRatio <= 1.5 && statefulP50 <= 20,
    });
  } catch (e) {
    emitError(BENCH, TARGET, e);
  } finally {
    for (const s of stacks) await s.close().catch(() => {});
    for (const r of relays) r.close();
    await cluster?.close();
    await rm(dir, { recursive: true, force: true });
  }
});

/** Where the Kubernetes stacks run: the test cluster, in a namespace of their own. */
interface BenchCluster {
  name: string;
  hostIP: string;
  namespace: string;
  kubeconfig: string;
  /** Requests the workers made so far. */
  callCount(): Promise<number>;
  verbs(): Promise<string[]>;
  close(): Promise<void>;
}

async function onCluster(dir: string, hostPorts: number[]): Promise<BenchCluster> {
  const ns = await TestNamespace.create({ dir, hostPorts });
  const calls = async () => (await ns.calls()).map((c) => `${c.verb} ${c.resource}`);
  return {
    name: 'kube-apiserver v1.34.4 + kubelet (scripts/start-kube.sh)',
    hostIP: ns.hostIP,
    namespace: ns.name,
    kubeconfig: ns.kubeconfigFile,
    callCount: async () => (await calls()).length,
    verbs: async () => [...new Set(await calls())].sort(),
    close: () => ns.close(),
  };
}
