import type { Logger } from 'pino';
import { DockerBackend, type ExecutionBackend } from '@sandgate/backends';
import type { Config } from '@sandgate/state';
import { UrlSigner, type Workspaces } from '@sandgate/storage';

/** The backend the configuration names. */
export function createBackend(config: Config, log: Logger, workspaces: Workspaces, signingKey: Buffer, instanceId: string): ExecutionBackend {
  const signer = new UrlSigner({ key: signingKey, publicUrl: config.publicUrl, ttlSeconds: config.downloadUrlTtlSeconds });
  return new DockerBackend({
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
    artifactUrl: (sessionId, path) => signer.downloadUrl(sessionId, path),
    logger: log.child({ component: 'docker' }),
  });
}
