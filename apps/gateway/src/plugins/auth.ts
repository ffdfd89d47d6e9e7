import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { SandgateError } from '@sandgate/contracts';
import { OPEN_TENANT } from '@sandgate/config';

declare module 'fastify' {
  interface FastifyRequest {
    /** The tenant of the API key, or null when the request carried none (public routes, signed downloads). */
    tenant: string | null;
    /** The request carried an operator key (or the gateway is open), on routes a tenant and an operator both use. */
    operator: boolean;
  }
  interface FastifyContextConfig {
    /** Routes that authorise by other means (health, docs, signed downloads). */
    public?: boolean;
    /** Operator routes (/metrics, /v1/system/stats): an operator key, not a tenant's (open mode: anyone). */
    operator?: boolean;
    /** Routes a tenant's key and an operator key both may use (GET /v1/templates): `req.operator` says which came. */
    tenantOrOperator?: boolean;
  }
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Compares every row, whatever matches, so the time taken says nothing about which key matched. */
function matcher<T>(rows: [string, T][]): (token: string) => T | null {
  const table = rows.map(([key, value]) => ({ hash: digest(key), value }));
  return (token) => {
    const h = digest(token);
    let found: T | null = null;
    for (const row of table) if (timingSafeEqual(row.hash, h)) found = row.value;
    return found;
  };
}

/**
 * Bearer API keys → tenants, and operator keys for the operator routes. With no API keys configured every request
 * is the one open tenant (the server refuses to listen beyond loopback in that mode, see server.ts), and the
 * operator routes are as open as the rest.
 */
export interface AuthOptions {
  apiKeys: Record<string, string>;
  operatorKeys: string[];
}

export const authPlugin = fp(async (app: FastifyInstance, opts: AuthOptions) => {
  const open = Object.keys(opts.apiKeys).length === 0;
  const tenantOfKey = matcher(Object.entries(opts.apiKeys));
  const isOperator = matcher(opts.operatorKeys.map((k) => [k, true]));
  app.decorateRequest('tenant', null);
  app.decorateRequest('operator', false);
  app.addHook('onRequest', async (req: FastifyRequest) => {
    if (open) {
      req.tenant = OPEN_TENANT;
      req.operator = true;
      return;
    }
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (req.routeOptions.config.tenantOrOperator && m && isOperator(m[1]!)) {
      req.operator = true;
      return;
    }
    if (req.routeOptions.config.operator) {
      if (m && isOperator(m[1]!)) return;
      if (m && tenantOfKey(m[1]!)) {
        throw new SandgateError('forbidden', 'this endpoint is for operators: use a key from SANDGATE_OPERATOR_KEYS');
      }
      const detail = m ? 'the key is not valid' : 'send an operator key as "Authorization: Bearer <key>"';
      throw new SandgateError('unauthorized', detail);
    }
    req.tenant = m ? tenantOfKey(m[1]!) : null;
    if (req.tenant || req.routeOptions.config.public) return;
    throw new SandgateError(
      'unauthorized',
      m ? 'the API key is not valid' : 'send an API key as "Authorization: Bearer <key>"',
    );
  });
});

/** The tenant of an authenticated route (the hook guarantees one). */
export const tenantOf = (req: FastifyRequest): string => {
  if (!req.tenant) throw new SandgateError('unauthorized', 'send an API key as "Authorization: Bearer <key>"');
  return req.tenant;
};
