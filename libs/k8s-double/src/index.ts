export { FAULTS, type Fault, type FaultAction, type FaultMatch, type Faults } from './faults.ts';
export { FaultProxy, type ProxiedCall, type ProxyTarget } from './fault-proxy.ts';
export { rulesAllow, podSecurityViolations, type PolicyRule, type PodSecurityLevel } from './admission.ts';
export { validateManifest, labelSelectorMatches } from './manifest-schema.ts';
