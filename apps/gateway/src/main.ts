import { ConfigError, configWarnings, createLogger, loadConfig } from '@sandgate/config';
import { startGateway } from './server.ts';

/** `npm run start:gateway`: the HTTP gateway alone (workers run elsewhere). */
async function main() {
  const config = loadConfig();
  const log = createLogger(config, 'sandgate-gateway');
  for (const warning of configWarnings()) log.warn(warning);
  const gateway = await startGateway(config, log);
  const stop = async (signal: string) => {
    log.info({ signal, grace_s: config.shutdownGraceMs / 1000 }, 'stopping: draining requests');
    await gateway.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((err: unknown) => {
  console.error(err instanceof ConfigError ? err.message : err instanceof Error ? err.message : err);
  process.exit(1);
});
