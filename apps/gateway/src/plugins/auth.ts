import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { SandgateError } from '@sandgate/contracts';
import { OPEN_TENANT } from '@sandgate/state';

declare module 'fastify' {
  interface FastifyRequest {
    /** The tenant of the API key, or null when the request carried none (public routes, signed downloads). */
    tenant: string | null;
  }
  interface FastifyContextConfig {
    /** Routes that authorise by other means (health, docs, signed downloads). */
    public?: boolean;
  }
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * Bearer API keys → tenants. With no keys configured every request is the one open tenant
 * (the server refuses to listen beyond loopback in that mode, see server.ts).
 */
export const authPlugin = fp(async (app: FastifyInstance, opts: { apiKeys: Record<string, string> }) => {
  const table = Object.entries(opts.apiKeys).map(([key, tenant]) => ({ hash: digest(key), tenant }));
  const open = table.length === 0;
  const lookup = (token: string): string | null => {
    const h = digest(token);
    let found: string | null = null;
    for (const row of table) if (timingSafeEqual(row.hash, h)) found = row.tenant;
    return found;
  };
  app.decorateRequest('tenant', null);
  app.addHook('onRequest', async (req: FastifyRequest) => {
    if (open) { req.tenant = OPEN_TENANT; return; }
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    req.tenant = m ? lookup(m[1]!) : null;
    if (req.tenant || req.routeOptions.config.public) return;
    throw new SandgateError('unauthorized', m ? 'the API key is not valid' : 'send an API key as "Authorization: Bearer <key>"');
  });
});

/** The tenant of an authenticated route (the hook guarantees one). */
export const tenantOf = (req: FastifyRequest): string => {
  if (!req.tenant) throw new SandgateError('unauthorized', 'send an API key as "Authorization: Bearer <key>"');
  return req.tenant;
};
