import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ProblemSchema, StatsHistorySchema, SystemStatsSchema, ref } from '@sandgate/contracts';
import type { GatewayDeps } from '../deps.ts';

const errors = { 401: ref(ProblemSchema), 403: ref(ProblemSchema), 503: ref(ProblemSchema) };

/**
 * What an operator reads: /metrics for Prometheus and its JSON twin for the dashboard. Both need an operator key
 * (SANDGATE_OPERATOR_KEYS) once API keys are configured; SANDGATE_METRICS_PORT serves /metrics without one, on a
 * port of its own (see metrics-server.ts).
 */
export const operatorRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  app.get(
    '/metrics',
    {
      config: { operator: true, unmetered: true },
      schema: {
        operationId: 'getMetrics',
        tags: ['system'],
        summary: 'Prometheus metrics of this gateway and of the whole deployment (operator key)',
        produces: ['text/plain'],
        response: { 200: Type.Unsafe({ type: 'string', description: 'Prometheus text format 0.0.4' }), ...errors },
      },
    },
    async (_req, reply) => reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics()),
  );

  app.get(
    '/v1/system/stats',
    {
      config: { operator: true },
      schema: {
        operationId: 'getSystemStats',
        tags: ['system'],
        summary: "The deployment's queue, runs, pool, sessions, SSE clients and workers, as JSON (operator key)",
        response: { 200: ref(SystemStatsSchema), ...errors },
      },
    },
    async () => (await deps.stats.read()).stats,
  );

  app.get(
    '/v1/system/stats/history',
    {
      config: { operator: true },
      schema: {
        operationId: 'getSystemStatsHistory',
        tags: ['system'],
        summary: "The deployment's queue, runs per minute, pool and live sessions over the last hour (operator key)",
        description:
          'One point every SANDGATE_STATS_HISTORY_S seconds (15), sampled by one gateway of the deployment at a ' +
          'time, kept in Redis for an hour.',
        response: { 200: ref(StatsHistorySchema), ...errors },
      },
    },
    async () => deps.statsHistory.read(),
  );
};
