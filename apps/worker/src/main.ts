import { ConfigError, createLogger, createRedis, keys, loadConfig, signingKey } from '@sandgate/state';
import { openWorkspaces } from '@sandgate/storage';
import { createBackend } from './backend.ts';
import { newWorkerId, startWorker } from './worker.ts';

/** `npm run start:worker`: one worker process; run as many as the engine can take. */
async function main() {
  const config = loadConfig();
  const log = createLogger(config, 'sandgate-worker');
  const workspaces = await openWorkspaces({
    dataDir: config.dataDir, owner: { uid: config.sandboxUid, gid: config.sandboxUid },
    sessionDiskBytes: config.sessionDiskBytes, warn: (message) => log.warn(message),
  });
  const redis = createRedis(config.redisUrl, 'sandgate-worker-boot');
  const key = await signingKey(redis, keys(config.redisPrefix), config.signingKey);
  redis.disconnect();
  const id = newWorkerId();
  const backend = createBackend(config, log, workspaces, key, id);
  await backend.check();
  const worker = await startWorker({ config, log, backend, workspaces, id });
  const stop = async (signal: string) => {
    log.info({ signal, grace_s: config.shutdownGraceMs / 1000 }, 'stopping: finishing running executions');
    await worker.close();
    await backend.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((err: unknown) => {
  console.error(err instanceof ConfigError ? err.message : err);
  process.exit(1);
});
