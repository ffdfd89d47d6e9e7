import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  ProblemSchema,
  SandgateError,
  TemplateBuildStreamEventSchema,
  TemplateListSchema,
  TemplateParamsSchema,
  TemplateRecipeSchema,
  TemplateSchema,
  ref,
} from '@sandgate/contracts';
import type { GatewayDeps } from '../deps.ts';
import type { Viewer } from '../core/template-control.ts';
import { resumeAfter, serveEventStream } from '../sse.ts';
import { holdOpen } from '../timeouts.ts';

/** Who asks, on a route a tenant and an operator may both use. */
const viewerOf = (req: FastifyRequest): Viewer => {
  if (req.operator) return { operator: true };
  if (!req.tenant) throw new SandgateError('unauthorized', 'send an API key as "Authorization: Bearer <key>"');
  return { tenant: req.tenant };
};

const BUILD_EVENTS_RESPONSES = {
  200: {
    description:
      'The build log as server-sent events: `log` events, then one `result` (ready or failed), after which the ' +
      'stream ends. Comment lines (`: heartbeat`) keep proxies from closing an idle stream.',
    content: { 'text/event-stream': { schema: ref(TemplateBuildStreamEventSchema) } },
  },
  204: {
    type: 'null',
    description:
      'Nothing (more) to stream: the build has ended and nothing is left after Last-Event-ID, or it has none.',
  },
};

/**
 * /v1/templates: the operator's templates. Everyone lists and reads those they may use (an operator key: all); an
 * operator makes (builds), replaces and deletes them, and follows a build's log.
 */
export const templateRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps; heartbeatMs?: number }> = async (
  app,
  { deps, heartbeatMs = 15_000 },
) => {
  const control = deps.templateControl;
  const errors = { 400: ref(ProblemSchema), 401: ref(ProblemSchema), 404: ref(ProblemSchema) };
  // A recipe's files come inline, base64: room for all of them, and the rest of the recipe.
  const bodyLimit = Math.ceil(deps.config.templateMaxFileBytes * 1.4) + (1 << 20);

  app.get(
    '',
    {
      config: { tenantOrOperator: true },
      schema: {
        operationId: 'listTemplates',
        tags: ['templates'],
        summary: 'The templates: a tenant sees those it may use, an operator key all',
        response: { 200: ref(TemplateListSchema), 401: ref(ProblemSchema) },
      },
    },
    async (req) => {
      const list = await control.list(viewerOf(req));
      return { templates: await Promise.all(list.map((t) => control.show(t))) };
    },
  );

  app.get(
    '/:name',
    {
      config: { tenantOrOperator: true },
      schema: {
        operationId: 'getTemplate',
        tags: ['templates'],
        summary: 'A template: its recipe, its state and its image',
        params: TemplateParamsSchema,
        response: { 200: ref(TemplateSchema), ...errors },
      },
    },
    async (req) => control.show(await control.require(viewerOf(req), req.params.name)),
  );

  app.post(
    '',
    {
      bodyLimit,
      config: { operator: true },
      schema: {
        operationId: 'createTemplate',
        tags: ['templates'],
        summary: 'Make or replace a template (operator key); on Docker its image is built by a worker',
        description:
          'Answers 202 with the template while its image builds (follow the build at links.build_events), 200 when ' +
          'it is ready at once (its recipe is unchanged, another template has its image, or it names its image). ' +
          'With ?wait=<s> the answer waits for the build: a build that fails answers 422 template_build_failed ' +
          'with the end of its log.',
        body: ref(TemplateRecipeSchema),
        querystring: Type.Object({
          wait: Type.Optional(
            Type.Number({ minimum: 0, maximum: 1800, description: 'Seconds to wait for the build to end.' }),
          ),
        }),
        response: {
          200: ref(TemplateSchema),
          202: ref(TemplateSchema),
          403: ref(ProblemSchema),
          409: ref(ProblemSchema),
          413: ref(ProblemSchema),
          422: ref(ProblemSchema),
          429: ref(ProblemSchema),
          ...errors,
        },
      },
    },
    async (req, reply) => {
      let rec = await control.put(req.body, 'api');
      if (req.query.wait) {
        holdOpen(req, req.query.wait * 1000);
        rec = await control.wait(rec, req.query.wait);
      }
      if (rec.state === 'failed') {
        throw new SandgateError(
          'template_build_failed',
          `template "${rec.name}" did not build: ${rec.error ?? 'see its build log'}`,
          { extra: { log: rec.logTail ?? '' } },
        );
      }
      return reply
        .status(rec.state === 'ready' ? 200 : 202)
        .header('location', `${deps.config.publicUrl}/v1/templates/${rec.name}`)
        .send(await control.show(rec));
    },
  );

  app.delete(
    '/:name',
    {
      config: { operator: true },
      schema: {
        operationId: 'deleteTemplate',
        tags: ['templates'],
        summary: 'Delete a template no live session uses (operator key)',
        params: TemplateParamsSchema,
        response: { 204: Type.Null(), 403: ref(ProblemSchema), 409: ref(ProblemSchema), ...errors },
      },
    },
    async (req, reply) => {
      await control.delete(req.params.name);
      return reply.status(204).send(null);
    },
  );

  app.get(
    '/:name/build/events',
    {
      config: { tenantOrOperator: true, openapi: { responses: BUILD_EVENTS_RESPONSES } },
      schema: {
        operationId: 'streamTemplateBuildEvents',
        tags: ['templates'],
        summary: "Server-Sent Events: the log of the template's latest build. Resume with Last-Event-ID",
        params: TemplateParamsSchema,
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
        response: { 200: Type.Null(), 204: Type.Null(), ...errors },
      },
    },
    async (req, reply) => {
      const rec = await control.require(viewerOf(req), req.params.name);
      const after = resumeAfter(req, req.query);
      if (rec.buildId === null) return reply.status(204).send(null);
      return serveEventStream(deps, req, reply, {
        key: deps.templates.buildEventsKey(rec.buildId),
        after,
        ended: rec.state !== 'building',
        heartbeatMs,
      });
    },
  );
};
