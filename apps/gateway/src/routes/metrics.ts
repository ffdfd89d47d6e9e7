import type { OutgoingHttpHeaders } from 'node:http';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ProblemSchema, SessionMetricsSchema, SessionParamsSchema, ref } from '@sandgate/contracts';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';
import { toProblem } from '../plugins/errors.ts';
import { SseWriter } from '../sse.ts';

/** How soon a client reconnects when this gateway ends its stream to shut down. */
const RECONNECT_MS = 250;

const STREAM_RESPONSES = {
  200: {
    description:
      'Server-sent events: `metrics` about once a second (each `data` a SessionMetrics, `sampled_at` increasing), ' +
      'then `end` (`{"reason":"session_deleted"}`) when the session is deleted, and the stream closes. A paused ' +
      'session goes on streaming its disk figures with nulls for the sandbox ones. Comment lines (`: heartbeat`) ' +
      'keep proxies from closing it; a sampling error becomes an `error` event (a problem) and the stream closes.',
    content: { 'text/event-stream': { schema: ref(SessionMetricsSchema) } },
  },
};

export interface MetricsRouteOptions {
  deps: GatewayDeps;
  /** SSE heartbeat interval; default 15 s. */
  heartbeatMs?: number;
}

/** GET /v1/sessions/:id/metrics and …/metrics/stream: a session's live figures (docs/metrics.md). */
export const metricsRoutes: FastifyPluginAsyncTypebox<MetricsRouteOptions> = async (
  app,
  { deps, heartbeatMs = 15_000 },
) => {
  const reader = deps.sessionMetrics;
  const errors = { 401: ref(ProblemSchema), 404: ref(ProblemSchema), 502: ref(ProblemSchema) };

  app.get(
    '/v1/sessions/:id/metrics',
    {
      schema: {
        operationId: 'getSessionMetrics',
        tags: ['sessions'],
        summary: "The session's CPU, memory, processes and disk now",
        description:
          'Sandbox figures come from its cgroup, disk figures from its files and quota. A session without a sandbox ' +
          '(`paused`, or `idle`: never run, or its sandbox ended) answers its disk figures and null for the rest. ' +
          'CPU is measured over the time since this gateway last sampled the session, or over a quarter second.',
        params: SessionParamsSchema,
        response: { 200: ref(SessionMetricsSchema), ...errors },
      },
    },
    async (req) => reader.read(tenantOf(req), req.params.id),
  );

  app.get(
    '/v1/sessions/:id/metrics/stream',
    {
      config: { openapi: { responses: STREAM_RESPONSES } },
      schema: {
        operationId: 'streamSessionMetrics',
        tags: ['sessions'],
        summary: "Server-Sent Events: the session's figures every second, until it is deleted",
        description:
          'Each gateway samples a session once a second however many clients watch it. At most ' +
          'SANDGATE_MAX_METRIC_STREAMS_PER_SESSION streams per session and SANDGATE_MAX_METRIC_STREAMS_PER_TENANT ' +
          'per tenant are open on a gateway at once (429 too_many_metric_streams).',
        params: SessionParamsSchema,
        response: { 200: { type: 'null' }, ...errors, 429: ref(ProblemSchema) },
      },
    },
    async (req, reply) => {
      const stream = await reader.open(tenantOf(req), req.params.id);
      // Waiting before the first sample is taken, so that the first one is this stream's too.
      let next = stream.next();
      reply.hijack();
      const headers = { ...reply.getHeaders(), 'x-request-id': String(req.id) } as OutgoingHttpHeaders;
      const sse = new SseWriter(reply.raw, headers, { heartbeatMs, retryMs: 2000 });
      deps.metrics.sseOpened();
      const stop = AbortSignal.any([sse.closed, deps.draining]);
      const stopped = new Promise<null>((resolve) => stop.addEventListener('abort', () => resolve(null)));
      try {
        for (let id = 1; !stop.aborted; id += 1) {
          const tick = await Promise.race([next, stopped]);
          if (tick === null) break;
          next = stream.next();
          if ('deleted' in tick) {
            sse.end(SseWriter.frame({ event: 'end', data: JSON.stringify({ reason: 'session_deleted' }) }));
            return;
          }
          await sse.send({ id: String(id), event: 'metrics', data: JSON.stringify(tick.metrics) });
        }
        if (deps.draining.aborted) await sse.reconnect(RECONNECT_MS, 'this gateway is shutting down; reconnect');
      } catch (err) {
        req.log.error({ err }, 'metrics stream failed');
        await sse.send({ event: 'error', data: JSON.stringify(toProblem(err, req)) });
      } finally {
        next.catch(() => {});
        stream.close();
        deps.metrics.sseClosed();
        sse.end();
      }
    },
  );
};
