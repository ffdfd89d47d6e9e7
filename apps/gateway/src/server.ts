import type { Logger } from 'pino';
import { isLoopback, type Config } from '@sandgate/state';
import { buildApp, type AppOptions } from './app.ts';
import { createGatewayDeps } from './deps.ts';
import { startMetricsServer } from './metrics-server.ts';

export interface RunningGateway {
  url: string;
  /** Where SANDGATE_METRICS_PORT serves /metrics, if set. */
  metricsUrl: string | null;
  close(): Promise<void>;
}

/**
 * Listens. With no API keys sandgate is open (one tenant, no auth), so it refuses to listen
 * anywhere but loopback in that mode.
 */
export async function startGateway(config: Config, log: Logger, options: AppOptions = {}): Promise<RunningGateway> {
  const open = Object.keys(config.apiKeys).length === 0;
  if (open && !isLoopback(config.host)) {
    throw new Error(
      `refusing to listen on ${config.host} without authentication: set SANDGATE_API_KEYS (key:tenant,...) or SANDGATE_HOST=127.0.0.1`,
    );
  }
  if (open) log.warn('no SANDGATE_API_KEYS set: running open as a single tenant, listening on loopback only');
  const deps = await createGatewayDeps(config, log);
  const app = await buildApp(deps, options);
  const url = await app.listen({ host: config.host, port: config.port });
  const metricsServer = config.metricsPort === null ? null
    : await startMetricsServer(deps.metrics, config.metricsHost, config.metricsPort, log);
  return {
    url,
    metricsUrl: metricsServer?.url ?? null,
    /**
     * Stops taking connections, ends SSE streams with a reconnect hint and long polls with the run as it is, waits
     * for the other requests in flight up to SANDGATE_SHUTDOWN_GRACE_S, then closes what is left.
     */
    async close() {
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
    },
  };
}
