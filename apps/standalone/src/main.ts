import { startGateway } from '@sandgate/gateway';
import { createBackend, newWorkerId, startWorker } from '@sandgate/worker';
import { ConfigError, createLogger, createRedis, keys, loadConfig, signingKey } from '@sandgate/state';
import { openWorkspaces } from '@sandgate/storage';

/** `npm start`: gateway and worker in one process, for a single machine. */
async function main() {
  const config = loadConfig();
  const log = createLogger(config, 'sandgate');
  const workspaces = await openWorkspaces({
    dataDir: config.dataDir, owner: { uid: config.sandboxUid, gid: config.sandboxUid },
    sessionDiskBytes: config.sessionDiskBytes, warn: (message) => log.warn(message),
  });
  const redis = createRedis(config.redisUrl, 'sandgate-boot');
  const key = await signingKey(redis, keys(config.redisPrefix), config.signingKey);
  redis.disconnect();
  const id = newWorkerId();
  const backend = createBackend(config, log, workspaces, key, id);
  await backend.check();
  const worker = await startWorker({ config, log, backend, workspaces, id });
  const gateway = await startGateway(config, log);
  log.info({ url: gateway.url, docs: `${gateway.url}/docs`, dashboard: `${gateway.url}/dashboard/` }, 'sandgate is serving');
  const stop = async (signal: string) => {
    const grace = config.shutdownGraceMs / 1000;
    log.info({ signal, grace_s: grace }, 'stopping: draining requests and finishing running executions');
    // Both at once: the gateway stops taking runs while the worker finishes those it holds.
    await Promise.all([gateway.close(), worker.close()]);
    await backend.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((err: unknown) => {
  console.error(err instanceof ConfigError ? err.message : err instanceof Error ? err.message : err);
  process.exit(1);
});
