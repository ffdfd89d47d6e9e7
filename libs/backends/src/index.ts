// What the apps use: the seam (backend.ts), the Docker backend and the settings a worker gives a backend. The
// Kubernetes backend itself is `@sandgate/backends/kubernetes`: @kubernetes/client-node takes a second to load, which
// a Docker worker (and every test on Docker) should not pay. Test support (the backend contract, sinks, the names and
// labels the backends give what they make) is `@sandgate/backends/testing`.
export type { BackendHealth, BackendStats, EventSink, ExecutionBackend, LiveSet } from './backend.ts';
export type { BackendLogger } from './logger.ts';
export { CAPABILITIES, type BackendCapabilities, type BackendName } from './capabilities.ts';
export { DockerBackend, type DockerBackendOptions } from './docker/docker-backend.ts';
export type { KubernetesBackendOptions } from './kubernetes/kubernetes-backend.ts';
export type { GrantTransfer, TransferGrant } from './kubernetes/pod-run.ts';
export type { EgressSettings } from './network/egress-proxy.ts';
export type { ToolSettings } from './run/tool-broker.ts';
export type { TemplatePoolFigures, TemplatePoolSpec } from './pool/template-pools.ts';
export { TemplateBuildError, type TemplateBuildOutcome, type TemplateBuildRequest } from './docker/template-build.ts';
export type { TemplateBuildSettings } from './templates/template-image.ts';
