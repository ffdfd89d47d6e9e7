import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  CreateExecutionSchema,
  ExecutionListQuerySchema,
  ExecutionStreamEventSchema,
  ExecutionListSchema,
  ExecutionParamsSchema,
  ExecutionSchema,
  ProblemSchema,
  ExecutionOutputSchema,
  OutputQuerySchema,
  SandgateError,
  WaitQuerySchema,
  isTerminal,
  ref,
} from '@sandgate/contracts';
import type { ExecutionRecord } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';
import { presentEventData, presentExecution } from '../core/present.ts';
import { resumeAfter, serveEventStream } from '../sse.ts';
import { holdOpen } from '../timeouts.ts';

/**
 * Binds a run's ids and tenant to every later log line of this request, the closing "request completed" one included
 * (Fastify logs that through the reply's logger).
 */
function bindRun(
  req: FastifyRequest,
  reply: FastifyReply,
  rec: Pick<ExecutionRecord, 'id' | 'session_id' | 'tenant'>,
): void {
  const log = req.log.child({ execution_id: rec.id, session_id: rec.session_id, tenant: rec.tenant });
  req.log = log;
  reply.log = log;
}

export interface ExecutionRouteOptions {
  deps: GatewayDeps;
  /** SSE heartbeat interval; default 15 s, under common proxy idle timeouts. */
  heartbeatMs?: number;
}

/** The stream as served: the route writes it itself, so the document says what it writes. */
const EVENT_STREAM_RESPONSES = {
  200: {
    description:
      'A stream of server-sent events, each `data` a JSON document; it ends after `result`. Comment lines ' +
      '(`: heartbeat`) keep proxies from closing an idle stream.',
    content: { 'text/event-stream': { schema: ref(ExecutionStreamEventSchema) } },
  },
  204: { type: 'null', description: 'The run has ended and no event is left after Last-Event-ID: stop reconnecting.' },
};

export const executionRoutes: FastifyPluginAsyncTypebox<ExecutionRouteOptions> = async (
  app,
  { deps, heartbeatMs = 15_000 },
) => {
  const { config, executions, signer, cursors } = deps;
  const { executionControl } = deps;
  const present = (r: Parameters<typeof presentExecution>[0]) => presentExecution(r, config.publicUrl, signer);
  const errors = { 400: ref(ProblemSchema), 401: ref(ProblemSchema), 404: ref(ProblemSchema) };
  // Room for the largest code after JSON escaping, plus inline files.
  const bodyLimit = config.maxCodeBytes * 6 + Math.ceil(Math.min(config.maxUploadBytes, 10 << 20) * 1.4) + 65_536;

  app.post(
    '',
    {
      bodyLimit,
      config: { quota: 'runs' },
      schema: {
        operationId: 'runExecution',
        tags: ['executions'],
        summary:
          'Run code. 202 with the queued execution, or with ?wait=<s> 200 with its result once it ends within the wait',
        body: ref(CreateExecutionSchema),
        querystring: WaitQuerySchema,
        response: {
          200: ref(ExecutionSchema),
          202: ref(ExecutionSchema),
          409: ref(ProblemSchema),
          413: ref(ProblemSchema),
          429: ref(ProblemSchema),
          507: ref(ProblemSchema),
          ...errors,
        },
      },
    },
    async (req, reply) => {
      holdOpen(req, (req.query.wait ?? 0) * 1000);
      const rec = await executionControl.create(tenantOf(req), req.body, req.query.wait);
      bindRun(req, reply, rec);
      const body = present(rec);
      return reply
        .status(isTerminal(rec.state) ? 200 : 202)
        .header('location', body.links.self)
        .send(body);
    },
  );

  app.get(
    '',
    {
      schema: {
        operationId: 'listExecutions',
        tags: ['executions'],
        summary: 'List the executions of the retention period, newest first, a page at a time',
        querystring: ExecutionListQuerySchema,
        response: { 200: ref(ExecutionListSchema), ...errors },
      },
    },
    async (req) => {
      const { session_id, state, limit = 50, cursor } = req.query;
      const tenant = tenantOf(req);
      const scope = `executions\n${tenant}\n${session_id ?? ''}\n${state ?? ''}`;
      const filter = { ...(session_id ? { sessionId: session_id } : {}), ...(state ? { state } : {}) };
      const { items, next } = await executions.page(tenant, filter, cursors.decode(scope, cursor), limit);
      return { executions: items.map(present), next_cursor: next === null ? null : cursors.encode(scope, next) };
    },
  );

  app.get(
    '/:id',
    {
      schema: {
        operationId: 'getExecution',
        tags: ['executions'],
        summary: 'Get an execution (and its result once it has ended); ?wait=<s> blocks until it ends',
        params: ExecutionParamsSchema,
        querystring: WaitQuerySchema,
        response: { 200: ref(ExecutionSchema), ...errors },
      },
    },
    async (req, reply) => {
      let rec = await executions.require(tenantOf(req), req.params.id);
      bindRun(req, reply, rec);
      if (req.query.wait) {
        holdOpen(req, req.query.wait * 1000);
        rec = await executionControl.wait(rec, req.query.wait);
      }
      return present(rec);
    },
  );

  app.get(
    '/:id/output',
    {
      schema: {
        operationId: 'getExecutionOutput',
        tags: ['executions'],
        summary: 'The output of an execution since given byte offsets, for clients that poll instead of holding SSE',
        description:
          'Ask again with the offsets of the answer until `ended` is true and the offsets stop moving. Each ' +
          'answer carries at most `max_bytes` of each stream, cut on a character boundary.',
        params: ExecutionParamsSchema,
        querystring: OutputQuerySchema,
        response: { 200: ref(ExecutionOutputSchema), 416: ref(ProblemSchema), ...errors },
      },
    },
    async (req, reply) => {
      const rec = await executions.require(tenantOf(req), req.params.id);
      bindRun(req, reply, rec);
      const { stdout_offset: outAt = 0, stderr_offset: errAt = 0, max_bytes: max = 65536 } = req.query;
      const ended = rec.result !== undefined && rec.result !== null;
      let out = '';
      let err = '';
      if (ended) {
        out = rec.result!.stdout;
        err = rec.result!.stderr;
      } else {
        for await (const ev of deps.hub.history(executions.eventsKey(rec.id))) {
          if (ev.type === 'stdout') out += JSON.parse(ev.data).text;
          else if (ev.type === 'stderr') err += JSON.parse(ev.data).text;
        }
      }
      const [stdout, stdoutOffset] = sliceFrom(out, outAt, max, 'stdout_offset');
      const [stderr, stderrOffset] = sliceFrom(err, errAt, max, 'stderr_offset');
      return {
        execution_id: rec.id,
        state: rec.state,
        ended,
        stdout,
        stderr,
        stdout_offset: stdoutOffset,
        stderr_offset: stderrOffset,
      };
    },
  );

  app.post(
    '/:id/cancel',
    {
      schema: {
        operationId: 'cancelExecution',
        tags: ['executions'],
        summary: 'Cancel an execution; answers with its state once it has ended (or after 10 s)',
        params: ExecutionParamsSchema,
        response: { 200: ref(ExecutionSchema), ...errors },
      },
    },
    async (req, reply) => {
      const rec = await executions.require(tenantOf(req), req.params.id);
      bindRun(req, reply, rec);
      return present(await executionControl.cancel(rec));
    },
  );

  app.get(
    '/:id/events',
    {
      config: { openapi: { responses: EVENT_STREAM_RESPONSES } },
      schema: {
        operationId: 'streamExecutionEvents',
        tags: ['executions'],
        summary:
          'Server-Sent Events: phase, stdout, stderr, artifact, result. Resume with Last-Event-ID (or ?last_event_id=)',
        params: ExecutionParamsSchema,
        querystring: Type.Object({
          last_event_id: Type.Optional(
            Type.String({ pattern: '^\\d+-\\d+$', description: 'As the Last-Event-ID header.' }),
          ),
        }),
        headers: Type.Object({
          'last-event-id': Type.Optional(
            Type.String({
              pattern: '^\\d+-\\d+$',
              description: 'Resume after this event id (EventSource sends it on reconnecting).',
            }),
          ),
        }),
        response: { 200: Type.Null(), 204: Type.Null(), ...errors },
      },
    },
    async (req, reply) => {
      const rec = await executions.require(tenantOf(req), req.params.id);
      bindRun(req, reply, rec);
      // An ended run's stream has nothing more to come: with nothing left after Last-Event-ID (what an EventSource
      // sends when it reconnects after the end), 204 tells it to stop reconnecting instead of holding it open.
      return serveEventStream(deps, req, reply, {
        key: executions.eventsKey(rec.id),
        after: resumeAfter(req, req.query),
        ended: isTerminal(rec.state),
        heartbeatMs,
        present: (type, data) => presentEventData(type, data, rec.session_id, signer),
      });
    },
  );
};

/**
 * At most `max` bytes of `text` (as UTF-8) from byte `offset`, ended on a character boundary, and the offset after
 * them. An offset past the end, or inside a character, was not one this endpoint gave: range_not_satisfiable.
 */
function sliceFrom(text: string, offset: number, max: number, name: string): [string, number] {
  const bytes = Buffer.from(text, 'utf8');
  const isContinuation = (i: number) => i < bytes.length && (bytes[i]! & 0xc0) === 0x80;
  if (offset > bytes.length || isContinuation(offset)) {
    throw new SandgateError(
      'range_not_satisfiable',
      `${name} ${offset} is not an offset of this output (${bytes.length} bytes so far)`,
    );
  }
  let end = Math.min(bytes.length, offset + max);
  while (end > offset && isContinuation(end)) end--;
  return [bytes.subarray(offset, end).toString('utf8'), end];
}
