/**
 * k8s-double-pod: what the Kubernetes API double costs per Pod, interleaved with the raw-docker-cold baseline on the
 * same engine — `python3 -c print(1)` as a one-container Pod through @kubernetes/client-node: create, poll the Pod
 * every 20 ms until Succeeded, read its log, delete with grace 0 (and wait until its containers are gone).
 * k8s-double-pod-3c: the exec-free shape (an init container, a runner and a harvest container over an emptyDir).
 * Both report API calls per run. The ratio bounds what a Kubernetes backend can reach on the double against the
 * Docker cold path (the target there is ≤ 1.3×); it is the double's cost, not a real cluster's.
 */
import { randomBytes } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import { K8sDouble } from '@sandgate/k8s-double';
import { pod, shContainer } from '@sandgate/k8s-double/testing';
import { N, WARMUP } from './lib/knobs.ts';
import { main, onCleanup } from './lib/main.ts';
import { makeWorkspace, rawColdRun } from './lib/raw-docker.ts';
import { emit, emitError, round, summarize } from './lib/stats.ts';

type Shape = 'one' | 'three';

function podOf(name: string, shape: Shape): k8s.V1Pod {
  const runner = { ...shContainer('runner', ''), command: ['python3', '-c', 'print(1)'] };
  if (shape === 'one') return pod(name, { containers: [runner] });
  const mount = [{ name: 'work', mountPath: '/work' }];
  return pod(name, {
    volumes: [{ name: 'work', emptyDir: { sizeLimit: '64Mi' } }],
    initContainers: [shContainer('stage', 'echo in > /work/in', { volumeMounts: mount })],
    containers: [{ ...runner, volumeMounts: mount }, shContainer('harvest', 'cat /work/in', { volumeMounts: mount })],
  });
}

async function podRun(double: K8sDouble, core: k8s.CoreV1Api, shape: Shape): Promise<{ ms: number; calls: number }> {
  const name = `bench-${randomBytes(4).toString('hex')}`;
  const namespace = double.namespace;
  const calls0 = double.calls.length;
  const t0 = performance.now();
  await core.createNamespacedPod({ namespace, body: podOf(name, shape) });
  for (;;) {
    const p = await core.readNamespacedPod({ name, namespace });
    if (p.status?.phase === 'Failed') throw new Error(`pod failed: ${JSON.stringify(p.status)}`);
    if (p.status?.phase === 'Succeeded') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const log = await core.readNamespacedPodLog({ name, namespace, container: 'runner' });
  if (log !== '1\n') throw new Error(`unexpected log ${JSON.stringify(log)}`);
  await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
  const ms = performance.now() - t0;
  await double.settled();
  return { ms, calls: double.calls.length - calls0 };
}

main(async () => {
  const runId = randomBytes(4).toString('hex');
  const ws = await makeWorkspace(runId);
  const double = await K8sDouble.start();
  onCleanup(() => double.close());
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions(double.kubeconfig);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  try {
    for (const shape of ['one', 'three'] as const) {
      const bench = shape === 'one' ? 'k8s-double-pod' : 'k8s-double-pod-3c';
      try {
        for (let i = 0; i < WARMUP; i++) await podRun(double, core, shape);
        const pods: number[] = [];
        const raws: number[] = [];
        const calls: number[] = [];
        for (let i = 0; i < N; i++) {
          const r = await podRun(double, core, shape);
          pods.push(r.ms);
          calls.push(r.calls);
          raws.push((await rawColdRun(runId, ws.dir)).totalMs);
        }
        const s = summarize(pods);
        const raw = summarize(raws);
        emit({
          bench,
          ...s,
          raw_p50_ms: raw.p50_ms,
          ratio: round(s.p50_ms / raw.p50_ms),
          api_calls_per_run_p50: summarize(calls).p50_ms,
          target: "informational: the double's own cost per Pod against raw-docker-cold",
          pass: true,
        });
      } catch (e) {
        emitError(bench, 'informational', e);
      }
    }
  } finally {
    await double.close();
    await ws.remove();
  }
});
