import { lookup } from 'node:dns/promises';
import type { Logger } from 'pino';
import { redisWarnings } from '@sandgate/state';
import { isLoopbackAddress, type Config } from '@sandgate/config';
import { buildApp, type AppOptions } from './app.ts';
import { createGatewayDeps } from './deps.ts';
import { startMetricsServer } from './metrics-server.ts';

export interface RunningGateway {
  url: string;
  /** Where SANDGATE_METRICS_PORT serves /metrics, if set. */
  metricsUrl: string | null;
  close(): Promise<void>;
}

const refuse = (config: Config, where: string) =>
  new Error(
    `refusing to listen on ${config.host} (${where}) without authentication: ` +
      'set SANDGATE_API_KEYS (key:tenant,...) or SANDGATE_HOST=127.0.0.1',
  );

/**
 * Listens. With no API keys sandgate is open (one tenant, no auth), so it refuses to listen anywhere but loopback in
 * that mode: by the addresses the host name resolves to before listening, and by the addresses bound after (a name
 * may resolve differently the second time).
 */
export async function startGateway(config: Config, log: Logger, options: AppOptions = {}): Promise<RunningGateway> {
  const open = Object.keys(config.apiKeys).length === 0;
  if (open) {
    const resolved = await lookup(config.host, { all: true }).catch(() => []);
    const outside = resolved.find((a) => !isLoopbackAddress(a.address));
    if (resolved.length === 0 || outside) {
      throw refuse(config, outside ? `it resolves to ${outside.address}` : 'it does not resolve');
    }
    log.warn('no SANDGATE_API_KEYS set: running open as a single tenant, listening on loopback only');
  }
  const deps = await createGatewayDeps(config, log);
  for (const warning of await redisWarnings(deps.redis)) log.warn(warning);
  const app = await buildApp(deps, options);
  const metricsServer =
    config.metricsPort === null
      ? null
      : await startMetricsServer(deps.metrics, config.metricsHost, config.metricsPort, log);
  /**
   * Stops taking connections, ends SSE streams with a reconnect hint and long polls with the run as it is, waits
   * for the other requests in flight up to SANDGATE_SHUTDOWN_GRACE_S, then closes what is left.
   */
  const close = async () => {
    metricsServer?.server.close();
    metricsServer?.server.closeAllConnections();
    const force = setTimeout(() => app.server.closeAllConnections(), config.shutdownGraceMs);
    // Node closes the connections idle when closing starts; these close those whose last response ends later.
    const idle = setInterval(() => app.server.closeIdleConnections(), 100);
    try {
      await app.close();
    } finally {
      clearTimeout(force);
      clearInterval(idle);
    }
    await deps.close();
  };
  const url = await app.listen({ host: config.host, port: config.port });
  const bound = app
    .addresses()
    .map((a) => (typeof a === 'string' ? a : a.address))
    .find((a) => !isLoopbackAddress(a));
  if (open && bound !== undefined) {
    await close();
    throw refuse(config, `bound to ${bound}`);
  }
  return { url, metricsUrl: metricsServer?.url ?? null, close };
}
