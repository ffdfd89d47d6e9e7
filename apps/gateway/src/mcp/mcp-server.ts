import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ErrorCode,
  ReadResourceRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { FastifyBaseLogger } from 'fastify';
import { MCP_DATA_ROOT } from '@sandgate/contracts';
import { TOOL_LIST, type McpTools } from './tools.ts';
import type { ToolCall } from './tool-call.ts';

const INSTRUCTIONS =
  'sandgate runs code in isolated sandboxes without network access. A session is a working ' +
  `directory, ${MCP_DATA_ROOT}, that persists across calls: upload_file puts files there, run_python / run_code ` +
  'run code there (files the code writes come back as artifacts, charts also as images), read_artifact and ' +
  'list_artifacts read them back, close_session deletes it. Calls without a session_id start a new session; ' +
  'pass the returned session_id to later calls. create_session {mode: "stateful"} keeps Python variables between ' +
  'runs.';

/** Where a saved script is as an MCP resource. */
export const SCRIPT_URI = 'sandgate://scripts/';
const SCRIPT_MIME: Record<string, string> = {
  python: 'text/x-python',
  javascript: 'text/javascript',
  typescript: 'text/x-typescript',
  bash: 'text/x-shellscript',
};

export interface RequestContext {
  tenant: string;
  /** The client's MCP session id, if it keeps one (for cancellation). */
  mcpSession: string | null;
  /** Aborts when the HTTP request is over. */
  closed: AbortSignal;
  log: FastifyBaseLogger;
  quota: ToolCall['quota'];
}

/**
 * An MCP server for one HTTP request: the endpoint is stateless, so every POST gets its own server and transport,
 * and any gateway replica can answer any request. The low-level Server is used because the tools' schemas are
 * TypeBox (JSON Schema) from libs/contracts, not zod.
 */
export function buildMcpServer(tools: McpTools, ctx: RequestContext, version: string): Server {
  const server = new Server(
    { name: 'sandgate', title: 'sandgate', version },
    { capabilities: { tools: { listChanged: false }, resources: {} }, instructions: INSTRUCTIONS },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOL_LIST }));
  // The tenant's saved scripts, as resources: read one for its code, run it with run_code (or REST, by name).
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: (await tools.scripts(ctx.tenant)).map((s) => ({
      uri: `${SCRIPT_URI}${s.name}`,
      name: s.name,
      title: s.name,
      description: `${s.description || 'A saved script.'} (${s.language})`,
      mimeType: SCRIPT_MIME[s.language],
    })),
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const name = request.params.uri.startsWith(SCRIPT_URI) ? request.params.uri.slice(SCRIPT_URI.length) : '';
    const script = name ? await tools.script(ctx.tenant, name) : undefined;
    if (!script) throw new McpError(ErrorCode.InvalidParams, `no resource ${request.params.uri}`);
    return { contents: [{ uri: request.params.uri, mimeType: SCRIPT_MIME[script.language], text: script.code }] };
  });
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const token = request.params._meta?.progressToken;
    let sent = 0;
    const call: ToolCall = {
      tenant: ctx.tenant,
      ref:
        ctx.mcpSession === null ? null : { tenant: ctx.tenant, mcpSession: ctx.mcpSession, requestId: extra.requestId },
      signal: AbortSignal.any([extra.signal, ctx.closed]),
      progress:
        token === undefined
          ? null
          : (message) =>
              extra.sendNotification({
                method: 'notifications/progress',
                params: { progressToken: token, progress: ++sent, message },
              }),
      log: ctx.log,
      quota: ctx.quota,
    };
    return tools.call(request.params.name, request.params.arguments ?? {}, call);
  });
  return server;
}
