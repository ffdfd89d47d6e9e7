import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import rateLimit from '@fastify/rate-limit';
import { SandgateError, type ErrorCode } from '@sandgate/contracts';
import { limitsFor, type TenantLimits } from '@sandgate/config';
import type { GatewayDeps } from '../deps.ts';

export type Quota = 'runs' | 'uploads';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The per-minute quota of the tenant a request counts against, besides its requests per minute. */
    quota?: Quota;
    /**
     * Never counted: health probes and the metrics scrape. Counting needs Redis, and these must answer while it is
     * away (liveness does not depend on it, readiness and /metrics report it).
     */
    unmetered?: boolean;
  }
  interface FastifyInstance {
    /**
     * Counts one run or upload of the request's tenant against its per-minute quota (quota_exceeded over it), for
     * work that a route without `config.quota` does on the tenant's behalf (MCP tool calls).
     */
    enforceQuota(req: FastifyRequest, quota: Quota): Promise<void>;
  }
}

type Check = (
  req: FastifyRequest,
) => Promise<{ isAllowed: boolean; isExceeded?: boolean; remaining?: number; ttlInSeconds?: number }>;

interface Limiter {
  check: Check;
  field: keyof TenantLimits;
  code: ErrorCode;
  what: string;
}

const WINDOW_MS = 60_000;

/**
 * Per-minute limits, counted in Redis by @fastify/rate-limit so that every gateway replica counts the same: requests
 * per API key's tenant (per client address on public routes) → 429 rate_limited; runs and uploads per tenant →
 * 429 quota_exceeded. Both carry Retry-After. Limits are the tenant's (SANDGATE_TENANT_LIMITS over the defaults);
 * 0 turns one off. Runs a tenant may have in flight are limited where they are recorded (ExecutionStore.start).
 */
export const limitsPlugin = fp(async (app: FastifyInstance, { deps }: { deps: GatewayDeps }) => {
  const { config, redis } = deps;
  const tenantOrAddress = (req: FastifyRequest) => (req.tenant ? `tenant:${req.tenant}` : `address:${req.ip}`);
  const limiter = async (name: string, field: keyof TenantLimits, code: ErrorCode, what: string): Promise<Limiter> => {
    let check: Check | undefined;
    // One registration per limit, each in a context of its own, so each counts under a key space of its own.
    await app.register(async (scope) => {
      await scope.register(rateLimit, {
        global: false,
        redis,
        nameSpace: `${config.redisPrefix}:rate:${name}:`,
        timeWindow: WINDOW_MS,
        keyGenerator: tenantOrAddress,
        max: (req) => limitsFor(config, req.tenant ?? '')[field],
      });
      check = scope.createRateLimit();
    });
    return { check: check!, field, code, what };
  };
  const requests = await limiter('requests', 'requests_per_min', 'rate_limited', 'requests');
  const quotas = {
    runs: await limiter('runs', 'runs_per_min', 'quota_exceeded', 'executions'),
    uploads: await limiter('uploads', 'uploads_per_min', 'quota_exceeded', 'uploads'),
  };

  /** Counts the request against `l`; with `reply`, says how much is left in X-RateLimit-* headers. */
  const enforce = async (l: Limiter, limits: TenantLimits, req: FastifyRequest, reply?: FastifyReply) => {
    const max = limits[l.field];
    if (max === 0) return;
    const r = await l.check(req);
    if (reply && !r.isAllowed) {
      reply
        .header('x-ratelimit-limit', max)
        .header('x-ratelimit-remaining', r.remaining)
        .header('x-ratelimit-reset', r.ttlInSeconds);
    }
    if (r.isExceeded) {
      // At least a second: a window that ends within this one has 0 s left by the count, not by the clock.
      const after = Math.max(1, r.ttlInSeconds ?? 1);
      throw new SandgateError(l.code, `more than ${max} ${l.what} per minute; retry in ${after} s`, {
        extra: { retry_after: after },
      });
    }
  };

  app.decorate('enforceQuota', async (req: FastifyRequest, quota: Quota) => {
    if (req.tenant) await enforce(quotas[quota], limitsFor(config, req.tenant), req);
  });
  app.addHook('onRequest', async (req, reply) => {
    if (req.routeOptions.config.unmetered) return;
    const quota = req.routeOptions.config.quota;
    // Both counts go out together (one round trip on the auto-pipelined connection).
    await Promise.all([
      enforce(requests, limitsFor(config, req.tenant ?? ''), req, reply),
      quota && app.enforceQuota(req, quota),
    ]);
  });
});
