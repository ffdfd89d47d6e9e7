export { K8sDouble, removeDoubleObjects, type K8sDoubleOptions } from './double.ts';
export type { ApiCall } from './server.ts';
export { FAULTS, type Fault, type FaultAction, type FaultMatch } from './faults.ts';
export { UNSCHEDULABLE_MESSAGE, type PodMatch, type Release } from './scenarios.ts';
export { rulesAllow, podSecurityViolations, type PolicyRule, type PodSecurityLevel } from './admission.ts';
export { DOUBLE_LABELS } from './docker-labels.ts';
export type { KubeConfigObject } from './kubeconfig.ts';
export type { NodeSettings } from './node-context.ts';
export { validateManifest, labelSelectorMatches } from './manifest-schema.ts';
