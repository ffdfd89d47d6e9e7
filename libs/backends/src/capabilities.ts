import type { ExecutionJob } from '@sandgate/contracts';

/** The backends sandgate has (SANDGATE_BACKEND). */
export type BackendName = 'docker' | 'kubernetes';

/** What a backend can run; the gateway refuses the rest with `unsupported_by_backend` before anything is queued. */
export interface BackendCapabilities {
  /** Where runs may happen (ExecutionJob.sandbox). */
  sandboxes: readonly ExecutionJob['sandbox'][];
  /** One-shots may take a warm, already started sandbox. */
  warmPool: boolean;
  /** Sandboxes may run under gVisor. */
  gvisor: boolean;
  /** Sessions may run services (POST /v1/sessions/:id/services), which the gateway reaches (services.ts). */
  services: boolean;
}

/**
 * Each backend's capabilities, importable without the backend itself (the gateway never loads an engine client).
 * Kubernetes runs one-shots in warm pool Pods (or a Pod of their own) and sessions in long-lived session Pods
 * (docs/kubernetes.md).
 */
export const CAPABILITIES: Record<BackendName, BackendCapabilities> = {
  docker: { sandboxes: ['oneshot', 'session', 'stateful'], warmPool: true, gvisor: true, services: true },
  kubernetes: { sandboxes: ['oneshot', 'session', 'stateful'], warmPool: true, gvisor: true, services: true },
};
