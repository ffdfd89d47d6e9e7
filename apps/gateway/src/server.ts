import { lookup } from 'node:dns/promises';
import type { Logger } from 'pino';
import { isLoopbackAddress, redisWarnings, type Config } from '@sandgate/state';
import { buildApp, type AppOptions } from './app.ts';
import { createGatewayDeps } from './deps.ts';

export interface RunningGateway {
  url: string;
  close(): Promise<void>;
}

const refuse = (config: Config, where: string) => new Error(
  `refusing to listen on ${config.host} (${where}) without authentication: `
  + 'set SANDGATE_API_KEYS (key:tenant,...) or SANDGATE_HOST=127.0.0.1',
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
  const close = async () => {
    await app.close();
    await deps.close();
  };
  const url = await app.listen({ host: config.host, port: config.port });
  const bound = app.addresses().map((a) => (typeof a === 'string' ? a : a.address)).find((a) => !isLoopbackAddress(a));
  if (open && bound !== undefined) {
    await close();
    throw refuse(config, `bound to ${bound}`);
  }
  return { url, close };
}
