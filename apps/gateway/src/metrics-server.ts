import { createServer, type Server } from 'node:http';
import type { Logger } from 'pino';
import type { GatewayMetrics } from './metrics.ts';

/**
 * SANDGATE_METRICS_PORT: /metrics alone, without a key, on a port of its own (loopback unless SANDGATE_METRICS_HOST
 * says otherwise), for a Prometheus that cannot send a bearer token. Answers with where it listens.
 */
export async function startMetricsServer(
  metrics: GatewayMetrics,
  host: string,
  port: number,
  log: Logger,
): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics here\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      (err: unknown) => {
        log.error({ err }, 'metrics scrape failed');
        res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable\n');
      },
    );
  });
  // A scrape is one short request: nothing to keep idle connections open for.
  server.keepAliveTimeout = 5000;
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, () => resolve()));
  const addr = server.address() as { port: number };
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${addr.port}/metrics`;
  log.info({ url }, 'serving /metrics without a key on its own port');
  return { url, server };
}
