import Fastify from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ProblemSchema, SHARED_SCHEMAS, SandgateError, ref } from '@sandgate/contracts';
import { DASHBOARD_DIR } from '@sandgate/dashboard';
import type { GatewayDeps } from './deps.ts';
import { authPlugin } from './plugins/auth.ts';
import { corsPlugin } from './plugins/cors.ts';
import { mcpRoutes } from './mcp/mcp-routes.ts';
import { describeRequestDefaults } from './openapi-request-defaults.ts';
import { openApiTransform } from './openapi-transform.ts';
import { previewHostRewrite } from './preview-links.ts';
import { startWebhookDispatcher } from './webhooks/dispatcher.ts';
import { clientErrorHandler, registerErrorHandling } from './plugins/errors.ts';
import { hostCheckPlugin } from './plugins/host-check.ts';
import { acceptEmptyJson } from './plugins/json-body.ts';
import { limitsPlugin } from './plugins/limits.ts';
import { dashboardRoutes } from './routes/dashboard.ts';
import { downloadRoutes } from './routes/downloads.ts';
import { executionRoutes } from './routes/executions.ts';
import { fileRoutes, VOLUME_FILES } from './routes/files.ts';
import { sessionRoutes } from './routes/sessions.ts';
import { sessionLifecycleRoutes } from './routes/session-lifecycle.ts';
import { operatorRoutes } from './routes/operator.ts';
import { systemRoutes } from './routes/system.ts';
import { transferRoutes } from './routes/transfers.ts';
import { scriptRoutes } from './routes/scripts.ts';
import { terminalRoutes } from './routes/terminal.ts';
import { metricsRoutes } from './routes/metrics.ts';
import { fileEventRoutes } from './routes/file-events.ts';
import { serviceRoutes } from './routes/services.ts';
import { toolRoutes } from './routes/tools.ts';
import { templateRoutes } from './routes/templates.ts';
import { volumeRoutes } from './routes/volumes.ts';
import { serverTimeouts } from './timeouts.ts';
import { cachedSerializerFactory } from './serializer-cache.ts';
import { routeUpgrades } from './upgrades.ts';

export interface AppOptions {
  /** SSE heartbeat interval (ms); default 15 000. */
  heartbeatMs?: number;
  /** Deliver callback_url webhooks from this process (when SANDGATE_WEBHOOK_ALLOW allows any); default true. */
  webhooks?: boolean;
  /** The built dashboard served at /dashboard/; default apps/dashboard/build. */
  dashboardDir?: string;
}

let requestSeq = 0;
const API_VERSION = '1.0.0';
const TAGS = [
  { name: 'sessions', description: 'Working directories (/mnt/data in the sandbox) that persist across executions.' },
  { name: 'files', description: 'Upload, list, download and delete the files of a session.' },
  {
    name: 'volumes',
    description:
      "A tenant's storage that outlives sessions: made with a size, mounted by sessions under /mnt/volumes/, its " +
      "files reached like a session's.",
  },
  { name: 'executions', description: 'Run code, wait for it, follow its events, cancel it.' },
  { name: 'scripts', description: 'Saved scripts of a tenant, run by name with arguments.' },
  { name: 'tools', description: "Tools the operator offers a tenant's code, and one call of one with no sandbox." },
  {
    name: 'services',
    description:
      "Long-running programs in a session's sandbox (a web app, a notebook), and the proxy that reaches them.",
  },
  {
    name: 'terminal',
    description: "A shell in a session's sandbox over a websocket, and the signed URLs that open one from a browser.",
  },
  {
    name: 'templates',
    description:
      "The operator's templates: the runtime image plus packages, files and settings, for sessions and one-shots.",
  },
  { name: 'system', description: 'Health, readiness and what this deployment offers.' },
];
const BEARER_SCHEME = {
  type: 'http' as const,
  scheme: 'bearer',
  description:
    'An API key from SANDGATE_API_KEYS, as `Authorization: Bearer <key>`. A gateway without keys (open ' +
    'mode, loopback only) needs none.',
};

/** The gateway as a Fastify app. Never listens: server.ts does, tests inject or listen on port 0. */
export async function buildApp(
  deps: GatewayDeps,
  { heartbeatMs, webhooks = true, dashboardDir = DASHBOARD_DIR }: AppOptions = {},
) {
  const app = Fastify({
    loggerInstance: deps.log,
    genReqId: () => `req_${Date.now().toString(36)}${(requestSeq++).toString(36)}`,
    bodyLimit: 1 << 20,
    ...serverTimeouts(deps.config),
    // Closing waits for requests in flight (server.ts bounds the wait by SANDGATE_SHUTDOWN_GRACE_S).
    forceCloseConnections: 'idle',
    clientErrorHandler,
    // Previews on an origin of their own: every request to a preview host is the preview's.
    ...(deps.config.previewOrigin ? { rewriteUrl: previewHostRewrite(deps.config.previewOrigin) } : {}),
    // Each response schema compiled once (the shared problem+json answers, and every app a test process builds).
    schemaController: { compilersFactory: { buildSerializer: cachedSerializerFactory() } },
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'sandgate',
        version: API_VERSION,
        description: 'Run code in isolated sandboxes over HTTP, stream its events, download the files it made.',
        license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      },
      servers: [{ url: 'http://127.0.0.1:8080', description: 'The default address; use your SANDGATE_PUBLIC_URL' }],
      components: { securitySchemes: { bearer: BEARER_SCHEME } },
      security: [{ bearer: [] }],
      tags: TAGS,
    },
    transform: openApiTransform,
    // Request bodies say their defaults in words, so that generators make those fields optional (the file says why).
    transformObject: (doc) => ('openapiObject' in doc ? describeRequestDefaults(doc.openapiObject) : doc.swaggerObject),
    refResolver: {
      buildLocalReference: (json, _base, _frag, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { deepLinking: true } });
  app.addHook('onRoute', (route) => {
    // The docs and the dashboard's static files: the dashboard asks for the key in the page.
    if (/^\/(docs|dashboard)(\/|$)/.test(route.url)) route.config = { ...(route.config as object), public: true };
    // Any route may meet the request limit (429) and, unless it answers any host, the host check (421, 403).
    const response = route.schema?.response as Record<string, unknown> | undefined;
    if (response) {
      const problem = ref(ProblemSchema);
      const anyHost = (route.config as { anyHost?: boolean } | undefined)?.anyHost;
      const guards = anyHost ? { 429: problem } : { 403: problem, 421: problem, 429: problem };
      route.schema!.response = { ...guards, ...response };
    }
  });
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);

  registerErrorHandling(app);
  // SSE streams and long polls end first, so that closing does not wait for them.
  app.addHook('preClose', async () => deps.drain());
  acceptEmptyJson(app);
  // Before the host check and the key: a browser's preflight carries neither a key nor anything to check.
  await app.register(corsPlugin, { config: deps.config });
  await app.register(hostCheckPlugin, { config: deps.config });
  await app.register(authPlugin, { apiKeys: deps.config.apiKeys, operatorKeys: deps.config.operatorKeys });
  // A Redis that hangs would hold every request for the command timeout: while the watchdog says it does not answer,
  // what needs it fails at once (probes and the scrape answer on their own; public files need no Redis).
  app.addHook('onRequest', async (req) => {
    if (deps.watchdog.up || req.routeOptions.config.unmetered || req.routeOptions.config.public) return;
    const detail = 'Redis does not answer right now; retry shortly';
    throw new SandgateError('redis_unavailable', detail, { extra: { retry_after: 1 } });
  });
  await app.register(limitsPlugin, { deps });
  app.addHook('onResponse', async (req, reply) => {
    deps.metrics.observeRequest(req.method, req.routeOptions.url, reply.statusCode, reply.elapsedTime / 1000);
  });

  app.get('/openapi.json', { config: { public: true }, schema: { hide: true } }, async () => app.swagger());
  await app.register(systemRoutes, { deps });
  await app.register(operatorRoutes, { deps });
  await app.register(sessionRoutes, { prefix: '/v1/sessions', deps });
  await app.register(sessionLifecycleRoutes, { prefix: '/v1/sessions', deps });
  await app.register(fileRoutes, { prefix: '/v1/sessions', deps });
  await app.register(fileEventRoutes, { prefix: '/v1/sessions', deps, ...(heartbeatMs ? { heartbeatMs } : {}) });
  await app.register(volumeRoutes, { prefix: '/v1/volumes', deps });
  await app.register(fileRoutes, { prefix: '/v1/volumes', deps, owner: VOLUME_FILES });
  await app.register(executionRoutes, { prefix: '/v1/executions', deps, ...(heartbeatMs ? { heartbeatMs } : {}) });
  await app.register(scriptRoutes, { prefix: '/v1/scripts', deps });
  await app.register(toolRoutes, { prefix: '/v1/tools', deps });
  await app.register(templateRoutes, { prefix: '/v1/templates', deps, ...(heartbeatMs ? { heartbeatMs } : {}) });
  await app.register(serviceRoutes, { deps });
  await app.register(terminalRoutes, { deps });
  await app.register(metricsRoutes, { deps, ...(heartbeatMs ? { heartbeatMs } : {}) });
  await app.register(downloadRoutes, { deps });
  await app.register(transferRoutes, { prefix: '/internal/transfer', deps });
  await app.register(mcpRoutes, { deps, version: API_VERSION });
  await app.register(dashboardRoutes, { dir: dashboardDir });
  routeUpgrades(app);
  if (webhooks && deps.config.webhookAllow.length > 0) {
    const dispatcher = startWebhookDispatcher(deps, deps.log);
    app.addHook('onClose', () => dispatcher.close());
  }
  return app;
}
