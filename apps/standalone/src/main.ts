import { startGateway } from '@sandgate/gateway';
import { bootWorker } from '@sandgate/worker';
import { ConfigError, configWarnings, createLogger, loadConfig } from '@sandgate/config';

/** `npm start`: gateway and worker in one process, for a single machine. */
async function main() {
  const config = loadConfig();
  const log = createLogger(config, 'sandgate');
  for (const warning of configWarnings()) log.warn(warning);
  const booted = await bootWorker(config, log);
  const gateway = await startGateway(config, log);
  log.info(
    { url: gateway.url, docs: `${gateway.url}/docs`, dashboard: `${gateway.url}/dashboard/` },
    'sandgate is serving',
  );
  const stop = async (signal: string) => {
    const grace = config.shutdownGraceMs / 1000;
    log.info({ signal, grace_s: grace }, 'stopping: draining requests and finishing running executions');
    // Both at once: the gateway stops taking runs while the worker finishes those it holds.
    await Promise.all([gateway.close(), booted.close()]);
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((err: unknown) => {
  console.error(err instanceof ConfigError ? err.message : err instanceof Error ? err.message : err);
  process.exit(1);
});
