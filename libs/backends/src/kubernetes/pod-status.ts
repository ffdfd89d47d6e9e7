import type * as k8s from '@kubernetes/client-node';
import { CONTAINERS } from './pod-spec.ts';

/** Waiting reasons that never resolve by themselves: the run fails at once, with the reason. */
const HOPELESS = new Set(['InvalidImageName', 'ErrImageNeverPull']);

/** What the worker needs to know of a sandbox Pod at one observation. */
export interface PodView {
  phase: string;
  /** The Pod's own reason (Evicted, DeadlineExceeded, Terminated …) and message, when it has one. */
  reason?: string;
  message?: string;
  stage?: k8s.V1ContainerState;
  runner?: k8s.V1ContainerState;
  harvest?: k8s.V1ContainerState;
  /** A container that cannot start, and why (image pull, config), for people. */
  stuck?: { reason: string; message: string; hopeless: boolean };
  /** Why the Pod is not scheduled, while it is not. */
  unschedulable?: string;
}

export function viewOf(pod: k8s.V1Pod): PodView {
  const st = pod.status ?? {};
  const state = (list: k8s.V1ContainerStatus[] | undefined, name: string) => list?.find((c) => c.name === name)?.state;
  const view: PodView = {
    phase: st.phase ?? 'Pending',
    ...(st.reason ? { reason: st.reason } : {}),
    ...(st.message ? { message: st.message } : {}),
  };
  const stage = state(st.initContainerStatuses, CONTAINERS.stage);
  const runner = state(st.containerStatuses, CONTAINERS.runner);
  const harvest = state(st.containerStatuses, CONTAINERS.harvest);
  if (stage) view.stage = stage;
  if (runner) view.runner = runner;
  if (harvest) view.harvest = harvest;
  for (const c of [...(st.initContainerStatuses ?? []), ...(st.containerStatuses ?? [])]) {
    const waiting = c.state?.waiting;
    if (!waiting?.reason || waiting.reason === 'PodInitializing' || waiting.reason === 'ContainerCreating') continue;
    view.stuck = {
      reason: waiting.reason,
      message: `${c.name}: ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`,
      hopeless: HOPELESS.has(waiting.reason),
    };
    break;
  }
  const scheduled = st.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False') view.unschedulable = scheduled.message ?? scheduled.reason ?? 'not scheduled';
  return view;
}

/** The runner has started (or already ended): its log can be read. */
export const runnerStarted = (v: PodView): boolean =>
  v.runner?.running !== undefined || v.runner?.terminated !== undefined;
