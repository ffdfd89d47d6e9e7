import * as k8s from '@kubernetes/client-node';
import type { KubernetesBackendOptions } from '@sandgate/backends';
import { KubernetesBackend } from '@sandgate/backends/kubernetes';
import { keys, TransferGrants } from '@sandgate/state';
import type { Stack } from '../harness.ts';

/**
 * A Kubernetes backend of its own on a stack started with `backend: 'kubernetes'` (worker: false): the stack's
 * namespace and worker credentials, gateway (for the Pods' files) and Redis (transfer grants); closed with the test.
 */
export function kubernetesBackendOf(
  s: Stack,
  t: { after(fn: () => Promise<void>): void },
  options: Partial<KubernetesBackendOptions> = {},
): KubernetesBackend {
  const ns = s.cluster;
  if (!ns) throw new Error('the stack was not started with backend: kubernetes');
  const kubeConfig = new k8s.KubeConfig();
  kubeConfig.loadFromOptions(ns.kubeconfig);
  const grants = new TransferGrants(s.deps.redis, keys(s.config.redisPrefix));
  const backend = new KubernetesBackend({
    kubeConfig,
    namespace: ns.name,
    gatewayUrl: s.config.k8sGatewayUrl!,
    workspaces: s.deps.workspaces,
    artifactUrl: (session, path) => `${s.url}/files/${session}/${path}`,
    deployment: s.config.redisPrefix,
    sweepGraceMs: 0,
    // No warm Pods unless a test asks: they would be this backend's own, unknown to the sweeps a test runs.
    poolSize: 0,
    cpuRequestRatio: s.config.k8sCpuRequestRatio,
    ...(s.config.image ? { image: s.config.image } : {}),
    grantTransfer: async (job, ttl) => {
      const ids = { execution_id: job.execution_id, session_id: job.session_id, tenant: job.tenant };
      const token = await grants.grant(ids, ttl);
      return { token, revoke: () => grants.revoke(token) };
    },
    ...options,
  });
  t.after(() => backend.close());
  return backend;
}
