/**
 * http-oneshot-k8s: POST /v1/executions?wait=60 {python, print(1)} through a real sandgate (`npm start`'s standalone
 * process) with SANDGATE_BACKEND=kubernetes against the Kubernetes API double, which runs each execution's Pod (stage,
 * runner, harvest) on this Docker engine; interleaved with the same run through a Docker-backend sandgate with the
 * warm pool off (its cold path), so the ratio compares the two on the same engine. Also: the same for a run of a
 * process session (files staged in and harvested out), against the Docker backend's session path, and the API calls
 * each run costs (the double records every request), with the request rate they make at 10 runs/s.
 *
 * What a real cluster adds (scheduling, image pulls, CNI, API server latency) the double does not have: these ratios
 * are the backend's own cost, a floor for a cluster's.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { K8sDouble } from '@sandgate/k8s-double';
import { freePort } from '../test/redis-and-ports.ts';
import { createSession, deleteSession, runWait } from './lib/api.ts';
import { N, WARMUP } from './lib/knobs.ts';
import { main } from './lib/main.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, round, summarize } from './lib/stats.ts';

const BENCH = 'http-oneshot-k8s';
const TARGET = 'one-shot p50 <= 1.3x the Docker cold path (http-oneshot-cold)';
const BODY = { language: 'python', code: 'print(1)' };
/** A session run reads a file the session holds: on Kubernetes stage fetches it into the Pod. */
const SESSION_BODY = { language: 'python', code: 'print(len(open("note.txt").read()) // 1000)' };
const LIMITS = { SANDGATE_MAX_SESSIONS: '100000', SANDGATE_LOG_LEVEL: 'warn' };

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
  const [port, relayPort] = [await freePort(), await freePort()];
  let double: K8sDouble | null = null;
  let relayServer: Server | null = null;
  const stacks: Stack[] = [];
  try {
    double = await K8sDouble.start({ hostPorts: [relayPort] });
    relayServer = await relay(double.hostIP, relayPort, port);
    const kubeconfig = join(dir, 'kubeconfig.yaml');
    await writeFile(kubeconfig, double.kubeconfigYaml(), { mode: 0o600 });
    const k8s = await startStack(['standalone'], {
      ...LIMITS,
      SANDGATE_PORT: String(port),
      SANDGATE_BACKEND: 'kubernetes',
      SANDGATE_K8S_NAMESPACE: double.namespace,
      SANDGATE_K8S_KUBECONFIG: kubeconfig,
      SANDGATE_K8S_GATEWAY_URL: `http://${double.hostIP}:${relayPort}`,
    });
    stacks.push(k8s);
    const docker = await startStack(['standalone'], { ...LIMITS, SANDGATE_POOL_SIZE: '0' });
    stacks.push(docker);
    const sessions = {
      k8s: (await createSession(k8s, { mode: 'process' })).id,
      docker: (await createSession(docker, { mode: 'process' })).id,
    };
    for (const [stack, id] of [
      [k8s, sessions.k8s],
      [docker, sessions.docker],
    ] as const) {
      const put = await fetch(`${stack.url}/v1/sessions/${id}/files/note.txt`, {
        method: 'PUT',
        body: 'x'.repeat(1000),
      });
      if (put.status !== 201) throw new Error(`upload: ${put.status} ${await put.text()}`);
    }
    for (let i = 0; i < WARMUP; i++) {
      await oneShot(k8s);
      await oneShot(docker);
      await runWait(k8s, { ...SESSION_BODY, session_id: sessions.k8s }, { wait: 60 });
      await runWait(docker, { ...SESSION_BODY, session_id: sessions.docker }, { wait: 60 });
    }
    const times = {
      k8s: [] as number[],
      docker: [] as number[],
      k8sSession: [] as number[],
      dockerSession: [] as number[],
    };
    const calls = { oneShot: 0, session: 0 };
    for (let i = 0; i < N; i++) {
      let before = double.calls.length;
      times.k8s.push(await oneShot(k8s));
      calls.oneShot += double.calls.length - before;
      times.docker.push(await oneShot(docker));
      before = double.calls.length;
      times.k8sSession.push((await runWait(k8s, { ...SESSION_BODY, session_id: sessions.k8s }, { wait: 60 })).ms);
      calls.session += double.calls.length - before;
      times.dockerSession.push(
        (await runWait(docker, { ...SESSION_BODY, session_id: sessions.docker }, { wait: 60 })).ms,
      );
    }
    const k = summarize(times.k8s);
    const d = summarize(times.docker);
    const ks = summarize(times.k8sSession);
    const ds = summarize(times.dockerSession);
    const ratio = k.p50_ms / d.p50_ms;
    const perRun = calls.oneShot / N;
    emit({
      bench: BENCH,
      ...k,
      docker_cold_p50_ms: d.p50_ms,
      session_run_p50_ms: ks.p50_ms,
      docker_session_p50_ms: ds.p50_ms,
      session_ratio: round(ks.p50_ms / ds.p50_ms, 3),
      api_calls_per_oneshot: round(perRun, 1),
      api_calls_per_session_run: round(calls.session / N, 1),
      api_requests_per_s_at_10_runs_per_s: round(perRun * 10, 1),
      verbs: double.verbs(),
      target: TARGET,
      ratio: round(ratio, 3),
      pass: ratio <= 1.3,
    });
  } catch (e) {
    emitError(BENCH, TARGET, e);
  } finally {
    for (const s of stacks) await s.close().catch(() => {});
    relayServer?.close();
    await double?.close();
    await rm(dir, { recursive: true, force: true });
  }
});
