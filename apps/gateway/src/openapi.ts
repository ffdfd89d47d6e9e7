import { pino } from 'pino';
import { loadConfig } from '@sandgate/config';
import { buildApp } from './app.ts';
import { createGatewayDeps } from './deps.ts';

/** The OpenAPI document of the routes as the code registers them (the committed openapi/ is this, serialised). */
export async function openApiDocument(redisUrl: string): Promise<unknown> {
  const prefix = 'sandgate-openapi';
  const config = loadConfig({
    REDIS_URL: redisUrl,
    SANDGATE_REDIS_PREFIX: prefix,
    SANDGATE_LOG_LEVEL: 'silent',
    SANDGATE_DATA_DIR: '/nonexistent',
  });
  const deps = await createGatewayDeps(config, pino({ level: 'silent' }));
  const app = await buildApp(deps, { webhooks: false });
  try {
    await app.ready();
    return app.swagger();
  } finally {
    await app.close();
    await deps.redis.del(`${prefix}:signing-key`);
    await deps.close();
  }
}

export const serialiseOpenApi = (doc: unknown) => `${JSON.stringify(doc, null, 2)}\n`;
