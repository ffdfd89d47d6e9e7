export type { BackendHealth, BackendStats, EventSink, ExecutionBackend, LiveSet } from './backend.ts';
export { DockerBackend, type DockerBackendOptions } from './docker/docker-backend.ts';
export { EGRESS_SOCKET } from './docker/egress-sockets.ts';
export type { EgressSettings } from './shared/egress-proxy.ts';
// The Kubernetes backend itself is `@sandgate/backends/kubernetes`: @kubernetes/client-node takes a second to load,
// which a Docker worker (and every test on Docker) should not pay.
export type { KubernetesBackendOptions } from './kubernetes/kubernetes-backend.ts';
export type { GrantTransfer, TransferGrant, PodTiming } from './kubernetes/pod-run.ts';
export {
  podName,
  secretName,
  sandboxPod,
  transferSecret,
  sessionPod,
  sessionPodName,
  CONTAINERS,
  DEFAULT_AGENT_PORT,
  DEFAULT_SERVICES_PORT,
  SERVICES_TOKEN_ANNOTATION,
  AGENT_TOKEN_ANNOTATION,
  type PodSettings,
} from './kubernetes/pod-spec.ts';
export { CAPABILITIES, type BackendCapabilities, type BackendName } from './capabilities.ts';
export type { PoolStats } from './docker/warm-pool.ts';
export { hostConfig, type SandboxLimits, type SandboxSettings } from './docker/container-spec.ts';
export { commandFor, programFor, WORKDIR } from './shared/sandbox.ts';
export type { ToolSettings } from './shared/tool-broker.ts';
export {
  LocalArtifactStore,
  type ArtifactStore,
  type HarvestReport,
  type HarvestRun,
  type TransferFailure,
} from './shared/artifact-store.ts';
export { OutputCollector, DEFAULT_MAX_OUTPUT_BYTES } from './shared/output.ts';
export {
  snapshot,
  collectArtifacts,
  MAX_ARTIFACTS,
  MAX_WALK_ENTRIES,
  MAX_HARVEST_HASH_BYTES,
  HARVEST_DEADLINE_MS,
  type Snapshot,
  type CollectOptions,
  type Harvest,
} from './shared/artifacts.ts';
export {
  buildResult,
  outcomeOf,
  type RunEnd,
  type RunLimits,
  type ResultParts,
  type CapturedOutput,
} from './shared/result.ts';
export {
  LABELS,
  MANAGED_SELECTOR,
  DEFAULT_DEPLOYMENT,
  ownershipLabels,
  poolLabels,
  sessionLabels,
  executionOf,
  deploymentOf,
  kindOf,
  ownerOf,
  isOrphan,
  type LabelSource,
  type SessionLabelSource,
  type SandboxKind,
} from './shared/labels.ts';
export { silentLogger, type BackendLogger } from './shared/logger.ts';
