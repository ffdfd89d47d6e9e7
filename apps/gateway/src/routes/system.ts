import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  LANGUAGES,
  SandgateError,
  ref,
  HealthSchema,
  ProblemSchema,
  RuntimeListSchema,
  WebhookSecretSchema,
} from '@sandgate/contracts';
import { REDIS_HANG_MS, WORKER_ALIVE_MS } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';
import { readiness } from '../core/readiness.ts';
import { webhookSecret } from '../webhooks/secrets.ts';

const VERSIONS: Record<string, string> = {
  python: '3.11',
  javascript: 'node 18',
  typescript: 'node 18, esbuild 0.17',
  bash: '5.2',
};

/** `p`, or a rejection once Redis has had REDIS_HANG_MS to answer. */
function bounded<T>(p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${REDIS_HANG_MS} ms`)), REDIS_HANG_MS);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** Liveness, readiness (Redis, and a live worker with a usable backend) and what this deployment runs. */
export const systemRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const { config } = deps;
  app.get(
    '/healthz',
    {
      config: { public: true, anyHost: true, unmetered: true },
      schema: {
        operationId: 'getHealth',
        tags: ['system'],
        summary: 'Liveness: the process answers',
        security: [],
        response: { 200: ref(HealthSchema) },
      },
    },
    async () => ({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      config: { public: true, anyHost: true, unmetered: true },
      schema: {
        operationId: 'getReadiness',
        tags: ['system'],
        security: [],
        summary: 'Readiness: Redis answers and a live worker can run sandboxes (its backend answers its probe)',
        response: { 200: ref(HealthSchema), 503: ref(ProblemSchema) },
      },
    },
    async () => {
      // A probe answers within a second, whatever Redis does: it does not wait out the command timeout.
      const redis = !deps.watchdog.up
        ? 'not answering'
        : await bounded(deps.redis.ping()).then(
            () => 'ok',
            (e: Error) => `unreachable: ${e.message}`,
          );
      const workers = redis === 'ok' ? await bounded(deps.workers.live(WORKER_ALIVE_MS)).catch(() => []) : [];
      const ready = readiness(redis, workers);
      if (!ready.ready) throw new SandgateError('not_ready', ready.detail);
      return { status: 'ready', checks: ready.checks };
    },
  );

  app.get(
    '/v1/webhook-secret',
    {
      schema: {
        operationId: 'getWebhookSecret',
        tags: ['system'],
        summary: "The secret that signs this tenant's webhooks (Standard Webhooks: verify webhook-signature with it)",
        response: { 200: ref(WebhookSecretSchema), 401: ref(ProblemSchema) },
      },
    },
    async (req) => ({ secret: webhookSecret(deps.signingKey, tenantOf(req)) }),
  );

  app.get(
    '/v1/runtimes',
    {
      schema: {
        operationId: 'listRuntimes',
        tags: ['system'],
        summary: 'Languages and limits of this deployment',
        response: { 200: ref(RuntimeListSchema), 401: ref(ProblemSchema) },
      },
    },
    async () => ({
      runtimes: LANGUAGES.map((language) => ({
        language,
        version: VERSIONS[language]!,
        image: config.image,
        sandbox_runtime: config.runtime,
      })),
      limits: {
        max_code_bytes: config.maxCodeBytes,
        max_upload_bytes: config.maxUploadBytes,
        max_output_bytes: config.maxOutputBytes,
        max_timeout_ms: config.execTimeoutMs,
        memory_mb: config.memoryMb,
        cpus: config.cpus,
      },
    }),
  );
};
