import type { ContainerState } from './pod-types.ts';

export type Phase = 'Pending' | 'Running' | 'Succeeded' | 'Failed';

/** What the kubelet knows of one container. */
export interface ContainerRecord {
  name: string;
  image: string;
  init: boolean;
  state: ContainerState;
  /** How the instance before the current one ended (restartPolicy OnFailure/Always). */
  lastState?: ContainerState;
  /** Instances started before the current one. */
  restartCount?: number;
  dockerId?: string;
  imageID?: string;
}

interface Condition {
  type: string;
  status: 'True' | 'False';
  reason?: string;
  message?: string;
  lastTransitionTime: string;
}

/** RFC 3339 with whole seconds, as Kubernetes writes times. */
export const k8sTime = (d: Date | string | number = new Date()): string =>
  new Date(d).toISOString().replace(/\.\d+Z$/, 'Z');

const isTerminated = (r: ContainerRecord) => 'terminated' in r.state;
const isRunning = (r: ContainerRecord) => 'running' in r.state;
const exitOf = (r: ContainerRecord) => ('terminated' in r.state ? r.state.terminated.exitCode : undefined);
/** The exit of the run before, for a container waiting to run again; undefined for any other. */
const restartingAfter = (r: ContainerRecord) =>
  'waiting' in r.state && r.lastState && 'terminated' in r.lastState ? r.lastState.terminated.exitCode : undefined;
const stopped = (r: ContainerRecord) => isTerminated(r) || restartingAfter(r) !== undefined;

/**
 * The kubelet's getPhase (no sidecars): a container waiting to run again counts as stopped. A failed init container
 * fails the Pod under restartPolicy Never; under OnFailure and Always it is retried and the Pod stays Pending. Once
 * every container has stopped, the Pod is Running under Always (they restart), Succeeded when all exited 0, Failed
 * under Never, Running under OnFailure (the failed ones restart).
 */
function phaseOf(init: ContainerRecord[], app: ContainerRecord[], restartPolicy: string): Phase {
  const initFailed = init.some((r) => (exitOf(r) ?? restartingAfter(r) ?? 0) !== 0);
  if (initFailed && restartPolicy === 'Never') return 'Failed';
  if (init.some((r) => !stopped(r))) return 'Pending';
  if (app.some((r) => !stopped(r) && !isRunning(r))) return 'Pending';
  if (app.some(isRunning)) return 'Running';
  if (restartPolicy === 'Always') return 'Running';
  if (app.every((r) => exitOf(r) === 0)) return 'Succeeded';
  return restartPolicy === 'Never' ? 'Failed' : 'Running';
}

/**
 * The Pod status the kubelet reports, built from its container records: phase by the kubelet's getPhase rules,
 * conditions, restart counts and last states, and the Pod-level reason of an eviction, deadline or shutdown.
 */
export class PodStatusModel {
  phase: Phase = 'Pending';
  reason?: string;
  message?: string;
  podIP?: string;
  hostIP?: string;
  startTime?: string;
  scheduled: { ok: boolean; reason?: string; message?: string; at: string } = { ok: false, at: k8sTime() };
  sandboxReady = false;
  readonly init: ContainerRecord[];
  readonly app: ContainerRecord[];
  readonly #transitions = new Map<string, { status: string; at: string }>();

  constructor(
    init: ContainerRecord[],
    app: ContainerRecord[],
    readonly qosClass: string,
    readonly restartPolicy = 'Never',
  ) {
    this.init = init;
    this.app = app;
  }

  get terminal(): boolean {
    return this.phase === 'Succeeded' || this.phase === 'Failed';
  }

  record(name: string): ContainerRecord | undefined {
    return [...this.init, ...this.app].find((r) => r.name === name);
  }

  /** Recomputes the phase from the containers; a terminal phase never changes again. */
  recompute(): void {
    if (!this.terminal) this.phase = phaseOf(this.init, this.app, this.restartPolicy);
  }

  /** Ends the Pod with a Pod-level reason (Evicted, DeadlineExceeded, Terminated), as the kubelet does. */
  fail(reason: string, message: string): void {
    this.phase = 'Failed';
    this.reason = reason;
    this.message = message;
  }

  #condition(type: string, ok: boolean, reason?: string, message?: string): Condition {
    const status = ok ? 'True' : 'False';
    const prev = this.#transitions.get(type);
    const at = prev && prev.status === status ? prev.at : k8sTime();
    this.#transitions.set(type, { status, at });
    return { type, status, ...(reason ? { reason } : {}), ...(message ? { message } : {}), lastTransitionTime: at };
  }

  #conditions(): Condition[] {
    if (!this.scheduled.ok)
      return [this.#condition('PodScheduled', false, this.scheduled.reason, this.scheduled.message)];
    const initPending = this.init.filter((r) => !isTerminated(r) || exitOf(r) !== 0).map((r) => r.name);
    const unready = this.app.filter((r) => !isRunning(r)).map((r) => r.name);
    const done = this.terminal ? 'PodCompleted' : undefined;
    const notReady = done ?? 'ContainersNotReady';
    const unreadyMsg = done ? undefined : `containers with unready status: [${unready.join(' ')}]`;
    return [
      this.#condition('PodReadyToStartContainers', this.sandboxReady && !this.terminal),
      this.#condition(
        'Initialized',
        initPending.length === 0,
        initPending.length ? 'ContainersNotInitialized' : undefined,
        initPending.length ? `containers with incomplete status: [${initPending.join(' ')}]` : undefined,
      ),
      this.#condition(
        'Ready',
        unready.length === 0 && !this.terminal,
        unready.length || done ? notReady : undefined,
        unreadyMsg,
      ),
      this.#condition(
        'ContainersReady',
        unready.length === 0 && !this.terminal,
        unready.length || done ? notReady : undefined,
        unreadyMsg,
      ),
      this.#condition('PodScheduled', true),
    ];
  }

  toJSON(): Record<string, unknown> {
    const status = (r: ContainerRecord) => ({
      name: r.name,
      state: r.state,
      lastState: r.lastState ?? {},
      ready: isRunning(r),
      restartCount: r.restartCount ?? 0,
      image: r.image,
      imageID: r.imageID ?? '',
      ...(r.dockerId ? { containerID: `docker://${r.dockerId}` } : {}),
      started: isRunning(r),
    });
    return {
      phase: this.phase,
      conditions: this.#conditions(),
      ...(this.reason ? { reason: this.reason } : {}),
      ...(this.message ? { message: this.message } : {}),
      ...(this.hostIP ? { hostIP: this.hostIP, hostIPs: [{ ip: this.hostIP }] } : {}),
      ...(this.podIP ? { podIP: this.podIP, podIPs: [{ ip: this.podIP }] } : {}),
      ...(this.startTime ? { startTime: this.startTime } : {}),
      ...(this.startTime && this.init.length ? { initContainerStatuses: this.init.map(status) } : {}),
      ...(this.startTime ? { containerStatuses: this.app.map(status) } : {}),
      qosClass: this.qosClass,
    };
  }
}

/** Guaranteed when every container's requests equal its limits for cpu and memory; BestEffort with none at all. */
export function qosClassOf(
  containers: { resources?: { limits?: Record<string, unknown>; requests?: Record<string, unknown> } }[],
): string {
  const all = containers.map((c) => c.resources ?? {});
  if (all.every((r) => !Object.keys(r.limits ?? {}).length && !Object.keys(r.requests ?? {}).length))
    return 'BestEffort';
  const guaranteed = all.every((r) =>
    ['cpu', 'memory'].every(
      (k) => r.limits?.[k] !== undefined && String(r.requests?.[k] ?? r.limits[k]) === String(r.limits[k]),
    ),
  );
  return guaranteed ? 'Guaranteed' : 'Burstable';
}
