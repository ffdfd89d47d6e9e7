// Test support for the double's own tests and for backend tests that run against it (not itself a test file).
import type { TestContext } from 'node:test';
import * as k8s from '@kubernetes/client-node';
import { K8sDouble, type K8sDoubleOptions } from './double.ts';
import { DOUBLE_LABELS } from './docker-labels.ts';

export const RUNTIME_IMAGE = 'sandgate/runtime:1';

export interface DoubleFixture {
  double: K8sDouble;
  core: k8s.CoreV1Api;
  namespace: string;
  kc: k8s.KubeConfig;
}

/** A double for one test, reached through a kubeconfig by the real client, closed (Docker objects and all) after it. */
export async function startDouble(t: TestContext, options: K8sDoubleOptions = {}): Promise<DoubleFixture> {
  const double = await K8sDouble.start(options);
  t.after(() => double.close());
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions(double.kubeconfig);
  return { double, core: kc.makeApiClient(k8s.CoreV1Api), namespace: double.namespace, kc };
}

/** The securityContext the restricted Pod Security level asks of every container. */
export const RESTRICTED: k8s.V1SecurityContext = {
  runAsNonRoot: true,
  runAsUser: 65534,
  runAsGroup: 65534,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

/** A container of the runtime image running a shell script, locked down as restricted requires. */
export function shContainer(name: string, script: string, extra: Partial<k8s.V1Container> = {}): k8s.V1Container {
  return {
    name,
    image: RUNTIME_IMAGE,
    command: ['sh', '-c', script],
    securityContext: structuredClone(RESTRICTED),
    ...extra,
  };
}

/** A one-shot Pod (restartPolicy Never, no token) around the given containers. */
export function pod(
  name: string,
  spec: Partial<k8s.V1PodSpec> & Pick<k8s.V1PodSpec, 'containers'>,
  labels: Record<string, string> = {},
): k8s.V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels },
    spec: { restartPolicy: 'Never', automountServiceAccountToken: false, terminationGracePeriodSeconds: 0, ...spec },
  };
}

/** Polls the Pod until `done` holds, failing after `timeoutMs`; answers the Pod and every phase it was seen in. */
export async function waitForPod(
  f: DoubleFixture,
  name: string,
  done: (p: k8s.V1Pod) => boolean,
  timeoutMs = 30_000,
): Promise<{ pod: k8s.V1Pod; phases: string[] }> {
  const deadline = Date.now() + timeoutMs;
  const phases: string[] = [];
  for (;;) {
    const p = await f.core.readNamespacedPod({ name, namespace: f.namespace });
    const phase = p.status?.phase ?? '';
    if (phases[phases.length - 1] !== phase) phases.push(phase);
    if (done(p)) return { pod: p, phases };
    if (Date.now() > deadline) throw new Error(`timed out waiting for pod ${name}: ${JSON.stringify(p.status)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export const terminal = (p: k8s.V1Pod): boolean => p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed';

/** The Docker containers this double made for a Pod (by its uid label). */
export async function podContainers(
  double: K8sDouble,
  uid: string,
): Promise<{ Id: string; Labels: Record<string, string>; State: string }[]> {
  return double.docker.listContainers({ all: true, filters: { label: [`${DOUBLE_LABELS.pod}=${uid}`] } });
}

/** The body of a client-node ApiException (raw text of a Status), parsed. */
export function statusOf(err: unknown): {
  code: number;
  reason: string;
  message: string;
  details?: Record<string, unknown>;
} {
  const e = err as { code?: number; body?: unknown };
  if (typeof e.code !== 'number') throw err;
  return typeof e.body === 'string' ? JSON.parse(e.body) : (e.body as never);
}

/** Awaits a call that must fail and answers its Status. */
export async function failure(call: Promise<unknown>): Promise<ReturnType<typeof statusOf>> {
  try {
    await call;
  } catch (err) {
    return statusOf(err);
  }
  throw new Error('the call succeeded where a failure was expected');
}

/** Polls events until one matches `fieldSelector` (e.g. `involvedObject.name=p,reason=FailedMount`) and answers it. */
export async function waitForEvent(
  f: DoubleFixture,
  fieldSelector: string,
  timeoutMs = 15_000,
): Promise<k8s.CoreV1Event> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { items } = await f.core.listNamespacedEvent({ namespace: f.namespace, fieldSelector });
    if (items[0]) return items[0];
    if (Date.now() > deadline) throw new Error(`timed out waiting for an event ${fieldSelector}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** What a watch event carries: an object of the kind watched, or a Status for an ERROR. */
export type WatchObject = Record<string, unknown> & {
  kind?: string;
  metadata?: k8s.V1ObjectMeta;
  code?: number;
  reason?: string;
  message?: string;
};

/** One event of a watch as the client library hands it over. */
export interface WatchEvent {
  type: string;
  object: WatchObject;
}

/** A watch through the client library's `Watch`, its events taken one at a time in order. */
export interface WatchFeed {
  /** The next event, failing after `timeoutMs` without one. */
  next(timeoutMs?: number): Promise<WatchEvent>;
  /** Events up to and including the first that `done` accepts. */
  until(done: (e: WatchEvent) => boolean, timeoutMs?: number): Promise<WatchEvent[]>;
  /** Settles when the client saw the stream end: the error it reported, or null. */
  ended: Promise<unknown>;
  /** Events received and not yet taken. */
  pending(): WatchEvent[];
  stop(): void;
}

/** Starts a watch on `path` (e.g. `/api/v1/namespaces/ns/pods`) with the real client; stopped after the test. */
export async function watchFeed(
  t: TestContext,
  f: DoubleFixture,
  path: string,
  query: Record<string, string | number | boolean> = {},
): Promise<WatchFeed> {
  const queue: WatchEvent[] = [];
  let wake = (): void => {};
  let endWith: (err: unknown) => void = () => {};
  const ended = new Promise<unknown>((resolve) => (endWith = resolve));
  const controller = await new k8s.Watch(f.kc).watch(
    path,
    query,
    (type, object) => {
      queue.push({ type, object });
      wake();
    },
    (err) => {
      endWith(err ?? null);
      wake();
    },
  );
  t.after(() => controller.abort());
  const next = async (timeoutMs = 15_000): Promise<WatchEvent> => {
    const deadline = Date.now() + timeoutMs;
    while (!queue.length) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no watch event on ${path} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return queue.shift()!;
  };
  const until = async (done: (e: WatchEvent) => boolean, timeoutMs = 30_000): Promise<WatchEvent[]> => {
    const seen: WatchEvent[] = [];
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const e = await next(Math.max(1, deadline - Date.now()));
      seen.push(e);
      if (done(e)) return seen;
    }
  };
  return { next, until, ended, pending: () => [...queue], stop: () => controller.abort() };
}
