// `@sandgate/backends/testing`: what tests and benches use of the backends beyond the seam (never product code).
export { describeBackendContract, type ContractSubject } from './contract.ts';
export { RecordingSink } from './recording-sink.ts';
export { LABELS, MANAGED_SELECTOR, ownershipLabels, poolLabels, sessionLabels } from '../housekeeping/labels.ts';
export {
  podName,
  secretName,
  sessionPodName,
  AGENT_TOKEN_ANNOTATION,
  DEFAULT_AGENT_PORT,
  DEFAULT_SERVICES_PORT,
  DEFAULT_VOLUMES_PORT,
  SERVICES_TOKEN_ANNOTATION,
} from '../kubernetes/pod-spec.ts';
export { hostConfig, type SandboxSettings } from '../docker/container-spec.ts';
export { WORKDIR } from '../run/sandbox.ts';
