import { Ajv, type ValidateFunction } from 'ajv';
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

/** How far one call may go: its time, and the bytes of its answer. */
export interface ToolLimits {
  timeoutMs: number;
  maxResponseBytes: number;
}

export type ToolAnswer = { ok: true; result: unknown } | { ok: false; error: string };

const ajv = new Ajv({ allErrors: true, strict: false });
const validators = new WeakMap<object, ValidateFunction>();

/** Checks `args` against the tool's input_schema; the problem, for the caller, or undefined. */
export function argumentsProblem(tool: { input_schema?: Record<string, unknown> }, args: unknown): string | undefined {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return 'the arguments must be an object';
  if (!tool.input_schema) return undefined;
  let validate = validators.get(tool.input_schema);
  if (!validate) {
    try {
      validate = ajv.compile(tool.input_schema);
    } catch (err) {
      return `the tool's input_schema is not valid JSON Schema: ${(err as Error).message}`;
    }
    validators.set(tool.input_schema, validate);
  }
  if (validate(args)) return undefined;
  return ajv.errorsText(validate.errors, { dataVar: 'args' });
}

/**
 * Calls an HTTP tool: POSTs the arguments as JSON, within `limits`, and answers its JSON (or its text). A non-2xx
 * status, a timeout or an answer over the size limit is a failed call with the reason; nothing here throws.
 */
export async function callHttpTool(tool: HttpTool, args: unknown, limits: ToolLimits): Promise<ToolAnswer> {
  const problem = argumentsProblem(tool, args);
  if (problem !== undefined) return { ok: false, error: `invalid arguments: ${problem}` };
  try {
    const res = await fetch(tool.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...tool.headers },
      body: JSON.stringify(args),
      redirect: 'error',
      signal: AbortSignal.timeout(limits.timeoutMs),
    });
    const declared = Number(res.headers.get('content-length') ?? '0');
    if (declared > limits.maxResponseBytes) {
      await res.body?.cancel();
      return { ok: false, error: `the answer is ${declared} bytes, over the limit of ${limits.maxResponseBytes}` };
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body ?? []) {
      size += (chunk as Uint8Array).length;
      if (size > limits.maxResponseBytes) {
        return { ok: false, error: `the answer is over the limit of ${limits.maxResponseBytes} bytes` };
      }
      chunks.push(Buffer.from(chunk as Uint8Array));
    }
    const text = Buffer.concat(chunks).toString('utf8');
    if (!res.ok) return { ok: false, error: `the tool answered ${res.status}: ${text.slice(0, 500)}` };
    if ((res.headers.get('content-type') ?? '').includes('json')) {
      try {
        return { ok: true, result: JSON.parse(text) as unknown };
      } catch {
        return { ok: false, error: 'the tool answered JSON that does not parse' };
      }
    }
    return { ok: true, result: text };
  } catch (err) {
    const e = err as Error;
    if (e.name === 'TimeoutError') return { ok: false, error: `the tool did not answer within ${limits.timeoutMs} ms` };
    return {
      ok: false,
      error: `the tool could not be reached: ${e.cause instanceof Error ? e.cause.message : e.message}`,
    };
  }
}
