/**
 * Labels on every Docker object the double makes (network, pause and app containers, volumes): a test, a sweeper
 * or an operator removes exactly one double's objects, or one Pod's, by them alone.
 */
export const DOUBLE_LABELS = {
  /** The double instance that made it. */
  double: 'org.sandgate.k8s-double',
  /** The uid of the Pod it belongs to (absent on the network, which all Pods share). */
  pod: 'org.sandgate.k8s-double.pod-uid',
  namespace: 'org.sandgate.k8s-double.namespace',
  podName: 'org.sandgate.k8s-double.pod-name',
  /** The Kubernetes container name; `POD` for the pause container that holds the Pod's network. */
  container: 'org.sandgate.k8s-double.container',
} as const;

export interface PodRef {
  doubleId: string;
  uid: string;
  namespace: string;
  name: string;
}

export function podLabels(ref: PodRef, container?: string): Record<string, string> {
  return {
    [DOUBLE_LABELS.double]: ref.doubleId,
    [DOUBLE_LABELS.pod]: ref.uid,
    [DOUBLE_LABELS.namespace]: ref.namespace,
    [DOUBLE_LABELS.podName]: ref.name,
    ...(container === undefined ? {} : { [DOUBLE_LABELS.container]: container }),
  };
}

/** Docker object names: short, unique per double and Pod, readable in `docker ps`. */
export const dockerName = (ref: PodRef, part: string): string => `k8sd-${ref.doubleId}-${ref.uid.slice(0, 8)}-${part}`;
