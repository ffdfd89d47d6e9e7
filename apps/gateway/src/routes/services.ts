import type { OutgoingHttpHeaders } from 'node:http';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  ProblemSchema,
  SandgateError,
  ServiceListSchema,
  ServiceLogsSchema,
  ServiceParamsSchema,
  ServicePreviewSchema,
  ServiceSchema,
  SessionParamsSchema,
  SharePreviewSchema,
  StartServiceSchema,
  StopServiceSchema,
  ref,
  type Service,
} from '@sandgate/contracts';
import { previewLabelOf } from '@sandgate/config';
import type { GatewayDeps } from '../deps.ts';
import { previewUrl } from '../preview-links.ts';
import { tenantOf } from '../plugins/auth.ts';
import { proxyHttp, proxyUpgrade, splitProxyUrl, type ProxyTarget } from '../service-proxy.ts';
import { upgradeOf } from '../upgrades.ts';
import { SseWriter } from '../sse.ts';
import { toProblem } from '../plugins/errors.ts';

/** How often a followed log asks the sandbox for new output. */
const FOLLOW_POLL_MS = 250;
const LogsQuery = Type.Object({
  offset: Type.Optional(Type.Integer({ minimum: 0, default: 0, description: 'next_offset of the previous read.' })),
  follow: Type.Optional(
    Type.Boolean({
      description:
        'Stream as Server-Sent Events: `log` events ({output, offset, next_offset}) as output comes, then one `end` ' +
        'event (the Service) once the service no longer runs.',
    }),
  ),
});
const ProxyParams = Type.Object({
  id: ServiceParamsSchema.properties.id,
  name: ServiceParamsSchema.properties.name,
  '*': Type.String({ description: 'The path the service gets.' }),
});
const PreviewParams = Type.Object({
  token: Type.String({ description: 'The signed part of a preview url.' }),
  '*': Type.String({ description: 'The path the service gets.' }),
});
const ANY = { '*/*': { schema: { type: 'string', format: 'binary' } } };
const PROXY_RESPONSES = {
  200: { description: "The service's own response, whatever its status and type.", content: ANY },
};
const PREVIEW_RESPONSES = {
  ...PROXY_RESPONSES,
  308: {
    type: 'null',
    description:
      'Where previews are served from an origin of their own (SANDGATE_PREVIEW_ORIGIN): the same link there, in ' +
      '`Location`.',
  },
};
/** Every method but GET (documented on its own; HEAD comes with it). */
const OTHER_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** /v1/sessions/:id/services: long-running programs in a session's sandbox, and their proxy (docs/services.md). */
export const serviceRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const services = deps.serviceManager;
  const errors = { 400: ref(ProblemSchema), 401: ref(ProblemSchema), 404: ref(ProblemSchema) };
  const unsupported = { 501: ref(ProblemSchema) };
  /** The session's sandbox did not answer as an agent should (service_unreachable). */
  const unreachable = { 502: ref(ProblemSchema) };

  app.post(
    '/v1/sessions/:id/services',
    {
      schema: {
        operationId: 'startService',
        tags: ['services'],
        summary: "Start a long-running program in the session's sandbox (a web app, a notebook, a database)",
        description:
          "Queued behind the session's current execution, then started; answers once it runs (or failed to " +
          'start), within 30 s (else `starting`). Its ports show once it listens; reach it at `proxy_url`.',
        params: SessionParamsSchema,
        body: ref(StartServiceSchema),
        response: {
          201: ref(ServiceSchema),
          409: ref(ProblemSchema),
          429: ref(ProblemSchema),
          ...unsupported,
          ...unreachable,
          ...errors,
        },
      },
    },
    async (req, reply) => reply.status(201).send(await services.start(tenantOf(req), req.params.id, req.body)),
  );

  app.get(
    '/v1/sessions/:id/services',
    {
      schema: {
        operationId: 'listServices',
        tags: ['services'],
        summary: "List the session's services and their state",
        params: SessionParamsSchema,
        response: { 200: ref(ServiceListSchema), ...unreachable, ...errors },
      },
    },
    async (req) => ({ services: await services.list(tenantOf(req), req.params.id) }),
  );

  app.get(
    '/v1/sessions/:id/services/:name',
    {
      schema: {
        operationId: 'getService',
        tags: ['services'],
        summary: 'Get a service: state, exit code, ports',
        params: ServiceParamsSchema,
        response: { 200: ref(ServiceSchema), ...unreachable, ...errors },
      },
    },
    async (req) => services.get(tenantOf(req), req.params.id, req.params.name),
  );

  app.get(
    '/v1/sessions/:id/services/:name/logs',
    {
      schema: {
        operationId: 'getServiceLogs',
        tags: ['services'],
        summary: "A service's output (stdout and stderr together) from an offset; follow=true streams it (SSE)",
        params: ServiceParamsSchema,
        querystring: LogsQuery,
        response: { 200: ref(ServiceLogsSchema), ...unreachable, ...errors },
      },
    },
    async (req, reply) => {
      const tenant = tenantOf(req);
      const { id, name } = req.params;
      const offset = req.query.offset ?? 0;
      if (!req.query.follow) {
        const logs = await services.logs(tenant, id, name, offset);
        return { output: logs.output, offset: logs.offset, next_offset: logs.next_offset, state: logs.service.state };
      }
      await services.get(tenant, id, name);
      return follow(req, reply, tenant, { id, name }, offset);
    },
  );

  /** Streams a service's output until it ends, the client goes, or the gateway drains. */
  async function follow(
    req: FastifyRequest,
    reply: FastifyReply,
    tenant: string,
    { id, name }: { id: string; name: string },
    from: number,
  ): Promise<void> {
    reply.hijack();
    const headers = { ...reply.getHeaders(), 'x-request-id': String(req.id) } as OutgoingHttpHeaders;
    const sse = new SseWriter(reply.raw, headers, { heartbeatMs: 15_000, retryMs: 2000 });
    const stop = AbortSignal.any([sse.closed, deps.draining]);
    let offset = from;
    try {
      for (;;) {
        const logs = await services.logs(tenant, id, name, offset);
        if (logs.next_offset > offset || logs.offset > offset) {
          const { output, next_offset } = logs;
          await sse.send({
            id: String(next_offset),
            event: 'log',
            data: JSON.stringify({ output, offset: logs.offset, next_offset }),
          });
          offset = next_offset;
        }
        if (!isLive(logs.service)) {
          await sse.send({ event: 'end', data: JSON.stringify(logs.service) });
          return;
        }
        if (stop.aborted) return;
        await new Promise((resolve) => {
          const t = setTimeout(resolve, FOLLOW_POLL_MS);
          stop.addEventListener(
            'abort',
            () => {
              clearTimeout(t);
              resolve(undefined);
            },
            { once: true },
          );
        });
        if (stop.aborted) return;
      }
    } catch (err) {
      req.log.error({ err }, 'service log stream failed');
      await sse.send({ event: 'error', data: JSON.stringify(toProblem(err, req)) });
    } finally {
      sse.end();
    }
  }

  app.post(
    '/v1/sessions/:id/services/:name/stop',
    {
      preValidation: async (req) => {
        req.body ??= {};
      },
      schema: {
        operationId: 'stopService',
        tags: ['services'],
        summary: 'Stop a service: SIGTERM, then SIGKILL after grace_ms; answers once it has ended',
        params: ServiceParamsSchema,
        body: ref(StopServiceSchema),
        response: { 200: ref(ServiceSchema), ...unreachable, ...errors },
      },
    },
    async (req) => services.stop(tenantOf(req), req.params.id, req.params.name, req.body.grace_ms ?? 5000),
  );

  app.delete(
    '/v1/sessions/:id/services/:name',
    {
      schema: {
        operationId: 'deleteService',
        tags: ['services'],
        summary: 'Stop a service if it runs, and forget it',
        params: ServiceParamsSchema,
        response: { 204: Type.Null(), ...unreachable, ...errors },
      },
    },
    async (req, reply) => {
      await services.remove(tenantOf(req), req.params.id, req.params.name);
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/v1/sessions/:id/services/:name/preview',
    {
      preValidation: async (req) => {
        req.body ??= {};
      },
      schema: {
        operationId: 'shareService',
        tags: ['services'],
        summary: 'A link that opens the service without an API key until it expires (to share a preview)',
        params: ServiceParamsSchema,
        body: ref(SharePreviewSchema),
        response: { 201: ref(ServicePreviewSchema), ...errors },
      },
    },
    async (req, reply) => {
      const { id, name } = req.params;
      return reply.status(201).send(await services.share(tenantOf(req), id, name, req.body.ttl_seconds ?? 3600));
    },
  );

  app.delete(
    '/v1/sessions/:id/services/:name/preview',
    {
      schema: {
        operationId: 'revokeServicePreviews',
        tags: ['services'],
        summary: 'Revoke every preview link of the service made so far (links made afterwards work)',
        params: ServiceParamsSchema,
        response: { 204: Type.Null(), ...errors },
      },
    },
    async (req, reply) => {
      await services.revokePreviews(tenantOf(req), req.params.id, req.params.name);
      return reply.status(204).send(null);
    },
  );

  /**
   * The session and service a proxied request names, once its API key (the hooks checked it) or its preview link is
   * checked; or, for a preview asked for on the gateway's origin where previews have one of their own, where it is.
   */
  async function resolve(req: FastifyRequest): Promise<ProxyTarget | { moved: string } | undefined> {
    const split = splitProxyUrl(req.raw.url ?? req.url);
    if (split === undefined) return undefined;
    if (split.kind === 'api') {
      const session = await deps.sessions.require(tenantOf(req), split.sessionId);
      return { session, name: split.name, path: split.rest, prefix: split.prefix, ownOrigin: false };
    }
    const origin = deps.config.previewOrigin;
    // A preview host's requests were rewritten to /preview/<token>/… (previewHostRewrite): that host is the origin.
    const ownOrigin = origin !== null && previewLabelOf(origin, req.headers.host) !== undefined;
    if (origin !== null && !ownOrigin) return { moved: previewUrl(deps.config, split.token) + split.rest.slice(1) };
    const { session, name } = await services.openPreview(split.token);
    return { session, name, path: split.rest, prefix: ownOrigin ? '' : split.prefix, ownOrigin };
  }

  // The proxy takes every body as it comes, as a stream: it is the service's to read.
  await app.register(async (instance) => {
    const raw = instance.withTypeProvider<TypeBoxTypeProvider>();
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
    const proxy = async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
      const target = await resolve(req);
      if (target === undefined) throw new SandgateError('not_found', 'no such service');
      if ('moved' in target) {
        await reply.redirect(target.moved, 308);
        return;
      }
      const { socket: upstream, port } = await services.connect(target.session, target.name);
      reply.hijack();
      for (const [k, v] of Object.entries(reply.getHeaders())) {
        if (v !== undefined && !reply.raw.hasHeader(k)) reply.raw.setHeader(k, v);
      }
      const { path, prefix, ownOrigin } = target;
      const to = { path, prefix, ownOrigin, port, secure: req.protocol === 'https' };
      // A websocket came through the same hooks (apps/gateway/src/upgrades.ts): here it is relayed, or refused.
      const upgrade = upgradeOf(req.raw);
      await (upgrade
        ? proxyUpgrade(req.raw, reply.raw, upgrade, upstream, to)
        : proxyHttp(req.raw, reply.raw, upstream, to));
    };
    for (const [url, params, operationId, summary, config] of [
      [
        '/v1/sessions/:id/services/:name/proxy/*',
        ProxyParams,
        'proxyService',
        "HTTP (and websockets) to the service's port; the path after /proxy is the service's",
        {},
      ],
      [
        '/preview/:token/*',
        PreviewParams,
        'previewService',
        'A service through a preview link (POST .../preview): no API key; pages are sandboxed',
        // A signed link is its own authority: no Host or Origin rule (a sandboxed page's requests say Origin: null).
        { public: true, anyHost: true },
      ],
    ] as const) {
      raw.route({
        method: 'GET',
        url,
        config: {
          ...config,
          openapi: { responses: url.startsWith('/preview') ? PREVIEW_RESPONSES : PROXY_RESPONSES },
        },
        schema: {
          operationId,
          tags: ['services'],
          summary,
          description: 'Every other method (POST, PUT, PATCH, DELETE, OPTIONS) is proxied the same way.',
          params,
          ...(url.startsWith('/preview') ? { security: [{}] } : {}),
          response: {
            400: ref(ProblemSchema),
            // An API key missing or wrong; a preview link not valid, or expired (forbidden).
            ...(url.startsWith('/preview') ? { 403: ref(ProblemSchema) } : { 401: ref(ProblemSchema) }),
            404: ref(ProblemSchema),
            409: ref(ProblemSchema),
            502: ref(ProblemSchema),
          },
        },
        handler: proxy,
      });
      raw.route({ method: [...OTHER_METHODS], url, config, schema: { hide: true, params }, handler: proxy });
    }
  });
};

const isLive = (s: Service): boolean => s.state === 'running' || s.state === 'starting';
