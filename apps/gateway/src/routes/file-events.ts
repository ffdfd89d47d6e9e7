import type { OutgoingHttpHeaders } from 'node:http';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  FileEventStreamEventSchema,
  ProblemSchema,
  SandgateError,
  SessionParamsSchema,
  ref,
} from '@sandgate/contracts';
import { compareStreamIds } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';
import { toProblem } from '../plugins/errors.ts';
import { listUrlOf } from '../core/file-events.ts';
import { resumeAfter, SseWriter } from '../sse.ts';

/** How soon a client reconnects when this gateway ends its stream to shut down. */
const RECONNECT_MS = 250;
/** How often a stream checks that its session still exists: a deleted session's stream ends. */
const SESSION_CHECK_MS = 5_000;

const EVENTS_RESPONSES = {
  200: {
    description:
      "The session's file events as server-sent events: `created`, `modified`, `deleted` (a FileEvent each), " +
      '`overflow` when more changed at once than is reported one by one, and first `missed` when Last-Event-ID is ' +
      'older than the events kept. It ends with an `error` event (a problem, `session_not_found`) once the session ' +
      'is deleted, and does not end otherwise; comment lines (`: heartbeat`) keep proxies ' +
      'from closing it (docs/file-events.md).',
    content: { 'text/event-stream': { schema: ref(FileEventStreamEventSchema) } },
  },
};

/** GET /v1/sessions/:id/files/events: the session's file events (docs/file-events.md). */
export const fileEventRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps; heartbeatMs?: number }> = async (
  app,
  { deps, heartbeatMs = 15_000 },
) => {
  const events = deps.fileEvents;
  app.get(
    '/:id/files/events',
    {
      config: { openapi: { responses: EVENTS_RESPONSES } },
      schema: {
        operationId: 'streamFileEvents',
        tags: ['files'],
        summary: 'Server-Sent Events: files of the session created, modified and deleted. Resume with Last-Event-ID',
        description:
          "From the session's sandbox (while it runs) and from uploads and deletes through the API, recursive, " +
          `coalesced per SANDGATE_FILE_EVENTS_INTERVAL_MS. Without Last-Event-ID it starts with the next change.`,
        params: SessionParamsSchema,
        querystring: Type.Object({
          last_event_id: Type.Optional(
            Type.String({ pattern: '^\\d+-\\d+$', description: 'As the Last-Event-ID header.' }),
          ),
        }),
        headers: Type.Object({
          'last-event-id': Type.Optional(
            Type.String({ pattern: '^\\d+-\\d+$', description: 'Resume after this event id.' }),
          ),
        }),
        response: {
          200: Type.Null(),
          400: ref(ProblemSchema),
          401: ref(ProblemSchema),
          404: ref(ProblemSchema),
        },
      },
    },
    async (req, reply) => {
      const { id } = req.params;
      const tenant = tenantOf(req);
      await deps.sessions.require(tenant, id);
      const after = resumeAfter(req, req.query);
      const bounds = await events.log.bounds(id);
      // Events after `after` were trimmed (or all expired): the client cannot have them, so it lists the files.
      const missed = after !== null && (bounds === null || compareStreamIds(after, bounds.first) < 0);
      const start = missed || after === null ? (bounds?.last ?? '0-0') : after;
      reply.hijack();
      const headers = { ...reply.getHeaders(), 'x-request-id': String(req.id) } as OutgoingHttpHeaders;
      const sse = new SseWriter(reply.raw, headers, { heartbeatMs, retryMs: 2000 });
      deps.metrics.sseOpened();
      const gone = new AbortController();
      const stop = AbortSignal.any([sse.closed, deps.draining, gone.signal]);
      const check = setInterval(() => {
        deps.sessions.get(tenant, id).then(
          (s) => s === null && gone.abort(),
          () => undefined,
        );
      }, SESSION_CHECK_MS);
      try {
        if (missed) {
          const data = JSON.stringify({
            code: 'file_events_missed',
            detail:
              `events after ${after} are no longer kept (the last ${deps.config.fileEventsKeep}, for ` +
              `${deps.config.fileEventsTtlSeconds} s after the latest): list the files, then follow from here`,
            list_url: listUrlOf(id),
          });
          await sse.send({ ...(bounds ? { id: bounds.last } : {}), event: 'missed', data });
        }
        events.listen(id, stop);
        for await (const ev of deps.hub.subscribe(events.log.key(id), start, stop)) {
          await sse.sendFrame(SseWriter.frame({ id: ev.id, event: ev.type, data: ev.data }));
        }
        if (gone.signal.aborted) {
          throw new SandgateError('session_not_found', `session ${id} was deleted`);
        }
        if (deps.draining.aborted) {
          await sse.reconnect(RECONNECT_MS, 'this gateway is shutting down; reconnect with Last-Event-ID');
        }
      } catch (err) {
        if (!gone.signal.aborted) req.log.error({ err }, 'file event stream failed');
        await sse.send({ event: 'error', data: JSON.stringify(toProblem(err, req)) });
      } finally {
        clearInterval(check);
        deps.metrics.sseClosed();
        sse.end();
      }
      return undefined;
    },
  );
};
