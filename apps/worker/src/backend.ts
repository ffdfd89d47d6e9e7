import type { Logger } from 'pino';
import {
  DockerBackend,
  type ExecutionBackend,
  type GrantTransfer,
  type EgressSettings,
  type ToolSettings,
} from '@sandgate/backends';
import { createRedis, keys, SessionStore, TransferGrants, withLuaScripts } from '@sandgate/state';
import { toolsFor, type Config } from '@sandgate/config';
import { egressAllowList, ToolCaller } from '@sandgate/outbound';
import { fileUrl, type Workspaces } from '@sandgate/storage';

/**
 * The backend the configuration names (SANDGATE_BACKEND). Workers hold no signing key: artifacts carry the file's
 * plain URL, and the gateway signs it whenever it presents one (responses, SSE, MCP, webhooks). The Kubernetes
 * backend and its client are loaded only when configured.
 */
export async function createBackend(
  config: Config,
  log: Logger,
  workspaces: Workspaces,
  instanceId: string,
): Promise<ExecutionBackend> {
  const artifactUrl = (sessionId: string, path: string) => fileUrl(config.publicUrl, sessionId, path);
  const tools = toolSettings(config);
  if (config.backend === 'kubernetes')
    return kubernetesBackend(config, log, workspaces, artifactUrl, instanceId, tools);
  return new DockerBackend({
    ...(config.dockerSocket !== null ? { socketPath: config.dockerSocket } : {}),
    image: config.image,
    runtime: config.runtime,
    workspaces,
    user: `${config.sandboxUid}:${config.sandboxUid}`,
    pidsLimit: config.pidsLimit,
    deployment: config.redisPrefix,
    instanceId,
    poolSize: config.poolSize,
    poolMaxRuns: config.poolMaxRuns,
    concurrency: config.workerConcurrency,
    poolLimits: { memory_mb: config.memoryMb, cpus: config.cpus },
    maxOutputBytes: config.maxOutputBytes,
    maxStateBytes: config.maxStateBytes,
    stateSaveTimeoutMs: config.stateSaveTimeoutMs,
    undoDepth: config.undoDepth,
    artifactUrl,
    ...(tools ? { tools } : {}),
    ...(Object.keys(config.egress).length > 0 ? { egress: egressSettings(config) } : {}),
    templateBuilds: {
      pipIndexUrl: config.templatePipIndexUrl,
      npmRegistry: config.templateNpmRegistry,
      wheelsDir: config.templateWheelsDir,
      caFile: config.templateCaFile,
      wheelsMaxBytes: config.templateWheelsMaxBytes,
    },
    logger: log.child({ component: 'docker' }),
  });
}

async function kubernetesBackend(
  config: Config,
  log: Logger,
  workspaces: Workspaces,
  artifactUrl: (sessionId: string, path: string) => string,
  instanceId: string,
  tools: ToolSettings | undefined,
): Promise<ExecutionBackend> {
  const [k8s, { KubernetesBackend }] = await Promise.all([
    import('@kubernetes/client-node'),
    import('@sandgate/backends/kubernetes'),
  ]);
  const kubeConfig = new k8s.KubeConfig();
  if (config.k8sKubeconfig !== null) kubeConfig.loadFromFile(config.k8sKubeconfig);
  else kubeConfig.loadFromDefault();
  const redis = createRedis(config, 'sandgate-worker-transfers');
  const grants = new TransferGrants(redis, keys(config.redisPrefix));
  const grantTransfer: GrantTransfer = async (job, ttlSeconds) => {
    const token = await grants.grant(
      { execution_id: job.execution_id, session_id: job.session_id, tenant: job.tenant },
      ttlSeconds,
    );
    return { token, revoke: () => grants.revoke(token) };
  };
  return new KubernetesBackend({
    kubeConfig,
    namespace: config.k8sNamespace,
    gatewayUrl: config.k8sGatewayUrl!,
    grantTransfer,
    workspaces,
    artifactUrl,
    image: config.image,
    ...(config.k8sHelperImage ? { helperImage: config.k8sHelperImage } : {}),
    ...(config.k8sRuntimeClass ? { runtimeClassName: config.k8sRuntimeClass } : {}),
    deployment: config.redisPrefix,
    maxOutputBytes: config.maxOutputBytes,
    maxStateBytes: config.maxStateBytes,
    stateSaveTimeoutMs: config.stateSaveTimeoutMs,
    undoDepth: config.undoDepth,
    // The Pod's workspace is its own disk: bounded by the session quota whatever the data directory's filesystem.
    workspaceBytes: config.sessionDiskBytes,
    timing: { startupMs: config.k8sStartupTimeoutMs },
    transferTimeoutS: config.k8sTransferTimeoutS,
    cpuRequestRatio: config.k8sCpuRequestRatio,
    agentPort: config.k8sAgentPort,
    servicesPort: config.k8sServicesPort,
    volumesPort: config.k8sVolumesPort,
    ...(tools ? { tools } : {}),
    ...(Object.keys(config.egress).length > 0 ? { egress: egressSettings(config) } : {}),
    instanceId,
    poolSize: config.poolSize,
    poolMaxRuns: config.poolMaxRuns,
    concurrency: config.workerConcurrency,
    poolLimits: { memory_mb: config.memoryMb, cpus: config.cpus },
    logger: log.child({ component: 'kubernetes' }),
    onClose: async () => {
      await redis.quit().catch(() => redis.disconnect());
    },
  });
}

/**
 * Egress of the tenants SANDGATE_EGRESS allows: their allow-lists, and whether a session became private, read from
 * Redis on every connection and followed on its channel, so that the proxy cuts a session's connections at once.
 */
function egressSettings(config: Config): EgressSettings {
  const redis = withLuaScripts(createRedis(config, 'sandgate-worker-egress'));
  const subscriber = createRedis(config, 'sandgate-worker-private');
  const k = keys(config.redisPrefix);
  const sessions = new SessionStore(redis, k);
  const listeners: ((sessionId: string) => void)[] = [];
  void subscriber.subscribe(k.privateChannel());
  subscriber.on('message', (_channel: string, sessionId: string) => listeners.forEach((l) => l(sessionId)));
  return {
    allowListOf: (tenant) => egressAllowList(config.egress, tenant),
    isPrivate: (sessionId) => sessions.isPrivate(sessionId),
    onPrivate: (listener) => listeners.push(listener),
    maxConnections: config.egressMaxConnections,
    close: async () => {
      await Promise.all([redis, subscriber].map((r) => r.quit().catch(() => r.disconnect())));
    },
  };
}

/** The tools runs may call, from SANDGATE_TOOLS and its bounds; undefined when no tenant has any. */
function toolSettings(config: Config): ToolSettings | undefined {
  if (Object.keys(config.tools).length === 0) return undefined;
  return {
    maxCalls: config.toolMaxCalls,
    timeoutMs: config.toolTimeoutMs,
    maxResponseBytes: config.toolMaxResponseBytes,
    toolsOf: (tenant) => toolsFor(config.tools, tenant),
    caller: new ToolCaller(),
  };
}
