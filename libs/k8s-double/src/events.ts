import { randomBytes } from 'node:crypto';
import { k8sTime } from './pod-status.ts';
import type { K8sObject, Store } from './store.ts';

/** Records core/v1 Events about Pods, as the scheduler and kubelet do; repeats of one reason bump `count`. */
export class EventRecorder {
  constructor(
    private readonly store: Store,
    private readonly nodeName: string,
  ) {}

  record(pod: K8sObject, type: 'Normal' | 'Warning', reason: string, message: string, component = 'kubelet'): void {
    const ns = pod.metadata.namespace!;
    const podName = pod.metadata.name!;
    const same = this.store
      .list('Event', ns)
      .find(
        (e) =>
          (e.involvedObject as { uid?: string }).uid === pod.metadata.uid &&
          e.reason === reason &&
          e.message === message,
      );
    const now = k8sTime();
    if (same) {
      this.store.update('Event', ns, same.metadata.name!, (e) => {
        e.count = Number(e.count ?? 1) + 1;
        e.lastTimestamp = now;
      });
      return;
    }
    this.store.insert('Event', {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `${podName}.${randomBytes(8).toString('hex')}`, namespace: ns },
      involvedObject: { kind: 'Pod', namespace: ns, name: podName, uid: pod.metadata.uid, apiVersion: 'v1' },
      reason,
      message,
      type,
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component, ...(component === 'kubelet' ? { host: this.nodeName } : {}) },
      reportingComponent: component,
      reportingInstance: component === 'kubelet' ? this.nodeName : '',
    });
  }
}
