import { randomUUID } from 'node:crypto';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { SandgateError } from '@sandgate/contracts';
import { keys } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';
import { MAX_INLINE_BYTES } from '../core/execution-control.ts';
import { tenantOf } from '../plugins/auth.ts';
import type { Quota } from '../plugins/limits.ts';
import { originPolicy, trustedOrigins } from '../plugins/origin-policy.ts';
import { RunCancels } from './run-cancels.ts';
import { RunTool } from './run-tool.ts';
import type { McpTools } from './tools.ts';
import { holdOpen } from '../timeouts.ts';

export interface McpRouteOptions {
  deps: GatewayDeps;
  /** Reported to clients as the server's version. */
  version: string;
}

const MCP_SESSION = /^[\x21-\x7e]{1,128}$/;
/** Cancels acted on per POST: a client cancels one call at a time; a batch of thousands is not honoured. */
const MAX_CANCELS = 16;

const messagesOf = (body: unknown): unknown[] => (Array.isArray(body) ? body : [body]);
const cancelled = (m: unknown): m is { params: { requestId: string | number } } => {
  const msg = m as { method?: unknown; params?: { requestId?: unknown } } | null;
  const id = msg?.params?.requestId;
  return msg?.method === 'notifications/cancelled' && (typeof id === 'string' || typeof id === 'number');
};

/**
 * POST /mcp: the Model Context Protocol over Streamable HTTP, stateless. Each POST is served by a fresh MCP server
 * (see mcp-server.ts) as the API key's tenant. The initialize response carries an `Mcp-Session-Id` that clients
 * echo; it is state-free and only lets a cancel, which comes in a POST of its own, find its call (RunCancels).
 */
export const mcpRoutes: FastifyPluginAsync<McpRouteOptions> = async (app, { deps, version }) => {
  const { config } = deps;
  const mayUse = originPolicy({
    publicUrl: config.publicUrl,
    open: Object.keys(config.apiKeys).length === 0,
    extra: trustedOrigins(config),
  });
  const runs = new RunTool(deps, new RunCancels(deps.redis, keys(config.redisPrefix), config.retentionSeconds));
  // The MCP SDK's server and its zod schemas load with the first POST: a gateway nobody asks over MCP (and every
  // process that starts one) does not pay their third of a second of CPU at start-up.
  let sdk: Promise<McpServerParts> | undefined;
  const mcp = () => (sdk ??= loadMcpServerParts(deps, runs));
  // Room for the largest upload_file (base64 in JSON) or code (JSON-escaped), whichever is larger.
  const upload = Math.ceil((Math.min(config.maxUploadBytes, MAX_INLINE_BYTES) * 4) / 3);
  const bodyLimit = Math.max(upload, config.maxCodeBytes * 6) + 65_536;

  app.addHook('onRequest', async (req: FastifyRequest) => {
    if (!mayUse(req.headers.origin)) {
      const detail = `Origin ${req.headers.origin} may not use /mcp; allowed: ${config.publicUrl}`;
      throw new SandgateError('forbidden', detail);
    }
  });

  app.post('/mcp', { bodyLimit, schema: { hide: true } }, async (req, reply) => {
    const { tools, buildMcpServer, StreamableHTTPServerTransport, isInitializeRequest } = await mcp();
    const tenant = tenantOf(req);
    const header = req.headers['mcp-session-id'];
    const echoed = typeof header === 'string' && MCP_SESSION.test(header) ? header : null;
    const mcpSession = echoed ?? (isInitializeRequest(req.body) ? `mcp_${randomUUID().replaceAll('-', '')}` : null);
    if (mcpSession) {
      for (const m of messagesOf(req.body).filter(cancelled).slice(0, MAX_CANCELS)) {
        await runs.cancel({ tenant, mcpSession, requestId: m.params.requestId });
      }
    }

    // A tool call may follow its run to the end in silence (no progress asked for): no idle timeout meanwhile.
    holdOpen(req, Infinity);
    const done = new AbortController();
    const quota = (kind: Quota) => app.enforceQuota(req, kind);
    const server = buildMcpServer(tools, { tenant, mcpSession, closed: done.signal, log: req.log, quota }, version);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    reply.raw.on('close', () => {
      done.abort();
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    if (mcpSession && !echoed) reply.raw.setHeader('mcp-session-id', mcpSession);
    // Headers set through Fastify (CORS, rate limits) are not sent on a hijacked reply unless copied onto it.
    for (const [name, value] of Object.entries(reply.getHeaders()))
      if (value !== undefined) reply.raw.setHeader(name, value);
    reply.hijack();
    try {
      await transport.handleRequest(req.raw, reply.raw, req.body);
    } catch (err) {
      // Fastify's error handler is out of the picture once the reply is hijacked.
      req.log.error({ err }, 'MCP request failed');
      if (reply.raw.headersSent) reply.raw.end();
      else {
        reply.raw
          .writeHead(500, { 'content-type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32603, message: 'Internal error' } }));
      }
    }
  });

  // Stateless: no stream for server-initiated messages to GET, no session to DELETE (both answers the spec allows).
  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: '/mcp',
      schema: { hide: true },
      handler: async (_req, reply) => {
        reply.header('allow', 'POST');
        throw new SandgateError(
          'method_not_allowed',
          `${method} /mcp is not offered: this MCP endpoint is stateless; POST JSON-RPC messages to it`,
        );
      },
    });
  }
};

interface McpServerParts {
  tools: McpTools;
  buildMcpServer: typeof import('./mcp-server.ts').buildMcpServer;
  StreamableHTTPServerTransport: typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js').StreamableHTTPServerTransport;
  isInitializeRequest: typeof import('@modelcontextprotocol/sdk/types.js').isInitializeRequest;
}

async function loadMcpServerParts(deps: GatewayDeps, runs: RunTool): Promise<McpServerParts> {
  const [{ McpTools }, { buildMcpServer }, { StreamableHTTPServerTransport }, { isInitializeRequest }] =
    await Promise.all([
      import('./tools.ts'),
      import('./mcp-server.ts'),
      import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
      import('@modelcontextprotocol/sdk/types.js'),
    ]);
  return { tools: new McpTools(deps, runs), buildMcpServer, StreamableHTTPServerTransport, isInitializeRequest };
}
