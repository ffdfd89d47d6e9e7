import { ConfigError, configWarnings, createLogger, loadConfig } from '@sandgate/config';
import { bootWorker } from './boot.ts';

/** `npm run start:worker`: one worker process; run as many as the engine can take. */
async function main() {
  const config = loadConfig();
  const log = createLogger(config, 'sandgate-worker');
  for (const warning of configWarnings()) log.warn(warning);
  const booted = await bootWorker(config, log);
  const stop = async (signal: string) => {
    log.info({ signal, grace_s: config.shutdownGraceMs / 1000 }, 'stopping: finishing running executions');
    await booted.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((err: unknown) => {
  console.error(err instanceof ConfigError ? err.message : err);
  process.exit(1);
});
