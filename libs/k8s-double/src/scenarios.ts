import { EventEmitter } from 'node:events';
import type { K8sObject } from './store.ts';

/** Which Pods a scenario applies to: a name, a name pattern, or any test of the object. */
export type PodMatch = string | RegExp | ((pod: K8sObject) => boolean);

export function matches(match: PodMatch, pod: K8sObject): boolean {
  const name = pod.metadata.name ?? '';
  if (typeof match === 'string') return name === match;
  if (match instanceof RegExp) return match.test(name);
  return match(pod);
}

/** Ends a scenario that holds until released (unschedulable, a forced waiting reason). */
export interface Release {
  release(): void;
}

interface Held<T> {
  match: PodMatch;
  value: T;
}

export const UNSCHEDULABLE_MESSAGE =
  '0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available: ' +
  '1 No preemption victims found for incoming pod.';

/**
 * The behaviour a test switches on for the Pods it names: the scheduler or kubelet consults it at each step,
 * and a change wakes whoever waits on it. Nothing here applies unless a test asked for it.
 */
export class Scenarios extends EventEmitter {
  readonly #unschedulable: Held<string>[] = [];
  readonly #waiting: Held<{ container: string; reason: string; message: string }>[] = [];
  /** Lines younger than this are not yet readable through pods/log (a kubelet or runtime lagging behind). */
  logLagMs = 0;

  #hold<T>(list: Held<T>[], item: Held<T>): Release {
    list.push(item);
    this.emit('change');
    return {
      release: () => {
        const i = list.indexOf(item);
        if (i >= 0) list.splice(i, 1);
        this.emit('change');
      },
    };
  }

  /** Matching Pods stay Pending with PodScheduled False/Unschedulable until released, then schedule. */
  unschedulable(match: PodMatch, message = UNSCHEDULABLE_MESSAGE): Release {
    return this.#hold(this.#unschedulable, { match, value: message });
  }

  schedulingProblem(pod: K8sObject): string | undefined {
    return this.#unschedulable.find((h) => matches(h.match, pod))?.value;
  }

  /**
   * A container of matching Pods stays `waiting` with this reason (CreateContainerConfigError, InvalidImageName,
   * RunContainerError, ...) until released; then the kubelet goes on to start it.
   */
  containerWaiting(match: PodMatch, container: string, reason: string, message = ''): Release {
    return this.#hold(this.#waiting, { match, value: { container, reason, message } });
  }

  forcedWaiting(pod: K8sObject, container: string): { reason: string; message: string } | undefined {
    return this.#waiting.find((h) => h.value.container === container && matches(h.match, pod))?.value;
  }

  /** Resolves at the next change of any scenario, or after `ms`: how a waiting kubelet loop sleeps. */
  nap(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.off('change', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.once('change', done);
    });
  }
}
