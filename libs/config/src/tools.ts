import { Type, type Static } from '@sinclair/typebox';

/** A tool's name as code calls it: `tools.weather.get(...)` calls `weather.get`. */
export const TOOL_NAME = '^[a-z][a-z0-9_]{0,31}(\\.[a-z][a-z0-9_]{0,31}){0,3}$';

/**
 * One HTTP tool an operator offers a tenant's code: a call POSTs its arguments as JSON to `url` and returns the
 * response's JSON (or text). `headers` (an API key, say) are added by the worker: they never reach the sandbox.
 */
export const HttpToolSchema = Type.Object(
  {
    url: Type.String({ pattern: '^https?://' }),
    description: Type.Optional(Type.String({ maxLength: 2000 })),
    /** The JSON Schema of the arguments object (checked before the call: required properties and their types). */
    input_schema: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    headers: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  { additionalProperties: false },
);
export type HttpTool = Static<typeof HttpToolSchema>;

/**
 * A remote MCP server (streamable HTTP) whose tools are offered under its name: the server `search` with a tool
 * `web` is called as `tools.search.web(...)`, by the name `search.web`.
 */
export const McpToolServerSchema = Type.Object(
  {
    mcp_url: Type.String({ pattern: '^https?://' }),
    headers: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  { additionalProperties: false },
);
export type McpToolServer = Static<typeof McpToolServerSchema>;

export type ToolSource = HttpTool | McpToolServer;
export const isMcpServer = (t: ToolSource): t is McpToolServer => 'mcp_url' in t;

/**
 * SANDGATE_TOOLS: `{ "<tenant>" | "*": { "<tool name>": HttpTool | McpToolServer } }`; `*` offers a tool to every
 * tenant.
 */
export const ToolRegistrySchema = Type.Record(
  Type.String({ pattern: '^([A-Za-z0-9_-]{1,64}|\\*)$' }),
  Type.Record(Type.String({ pattern: TOOL_NAME }), Type.Union([HttpToolSchema, McpToolServerSchema])),
);
export type ToolRegistry = Static<typeof ToolRegistrySchema>;

/** The tools a tenant's code may call: those offered to every tenant, then its own (which win on a name). */
export function toolsFor(registry: ToolRegistry, tenant: string): Record<string, ToolSource> {
  return { ...registry['*'], ...registry[tenant] };
}

/**
 * Which offered tool a call of `name` is: an HTTP tool of that very name, or a tool of an MCP server whose name is a
 * prefix of it (`search.web`: the tool `web` of the server `search`). Undefined: no such tool.
 */
export function resolveTool(
  tools: Record<string, ToolSource>,
  name: string,
): { http: HttpTool } | { server: McpToolServer; tool: string } | undefined {
  const exact = Object.hasOwn(tools, name) ? tools[name] : undefined;
  if (exact !== undefined && !isMcpServer(exact)) return { http: exact };
  const parts = name.split('.');
  for (let i = parts.length - 1; i >= 1; i--) {
    const prefix = parts.slice(0, i).join('.');
    const source = Object.hasOwn(tools, prefix) ? tools[prefix] : undefined;
    if (source !== undefined && isMcpServer(source)) return { server: source, tool: parts.slice(i).join('.') };
  }
  return undefined;
}
