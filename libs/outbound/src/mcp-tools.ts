import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { isMcpServer, resolveTool, type McpToolServer, type ToolSource } from '@sandgate/config';
import { argumentsProblem, callHttpTool, type ToolAnswer, type ToolLimits } from './tool-calls.ts';

/** A tool an MCP server lists. */
export interface McpTool {
  name: string;
  description: string | null;
  input_schema: Record<string, unknown> | null;
}

/** How long a server's list of tools is used before it is asked again. */
const LIST_TTL_MS = 60_000;

interface Connection {
  client: Client;
  tools?: { at: number; list: McpTool[] };
}

/**
 * Clients of the MCP servers tools come from (streamable HTTP, the official SDK), one per tenant and server, connected
 * when first needed and again after a failure. Per tenant: a server that keeps state per MCP session (a login, a
 * working directory, what earlier calls left) must never hand one tenant's state to another offered the same server.
 */
export class McpToolClients {
  readonly #connections = new Map<string, Promise<Connection>>();

  readonly #name: string;
  constructor(name = 'sandgate') {
    this.#name = name;
  }

  /** The server's tools as `tenant` sees them (cached for a minute). */
  async list(tenant: string, server: McpToolServer, limits: ToolLimits): Promise<McpTool[]> {
    const c = await this.#connect(tenant, server, limits);
    if (c.tools && Date.now() - c.tools.at < LIST_TTL_MS) return c.tools.list;
    try {
      const { tools } = await c.client.listTools(undefined, { timeout: limits.timeoutMs });
      const list = tools.map((t) => ({
        name: t.name,
        description: t.description ?? null,
        input_schema: (t.inputSchema as Record<string, unknown>) ?? null,
      }));
      c.tools = { at: Date.now(), list };
      return list;
    } catch (err) {
      this.#forget(tenant, server);
      throw err;
    }
  }

  /** Calls `tool` of the server for `tenant`, within `limits`; never throws. */
  async call(
    tenant: string,
    server: McpToolServer,
    tool: string,
    args: unknown,
    limits: ToolLimits,
  ): Promise<ToolAnswer> {
    try {
      const listed = (await this.list(tenant, server, limits)).find((t) => t.name === tool);
      if (listed === undefined) return { ok: false, error: `the MCP server lists no tool "${tool}"` };
      const problem = argumentsProblem({ input_schema: listed.input_schema ?? undefined }, args);
      if (problem !== undefined) return { ok: false, error: `invalid arguments: ${problem}` };
      const c = await this.#connect(tenant, server, limits);
      const r = await c.client.callTool({ name: tool, arguments: args as Record<string, unknown> }, undefined, {
        timeout: limits.timeoutMs,
      });
      const content = (r.content ?? []) as { type: string; text?: string }[];
      const text = content
        .filter((x) => x.type === 'text')
        .map((x) => x.text ?? '')
        .join('\n');
      if (r.isError) return { ok: false, error: text || 'the MCP tool failed' };
      const result = r.structuredContent ?? text;
      const size = Buffer.byteLength(JSON.stringify(result) ?? '');
      if (size > limits.maxResponseBytes) {
        return { ok: false, error: `the answer is ${size} bytes, over the limit of ${limits.maxResponseBytes}` };
      }
      return { ok: true, result };
    } catch (err) {
      this.#forget(tenant, server);
      const e = err as Error;
      if (/timed? ?out/i.test(e.message))
        return { ok: false, error: `the tool did not answer within ${limits.timeoutMs} ms` };
      return { ok: false, error: `the MCP server could not be reached: ${e.message}` };
    }
  }

  async close(): Promise<void> {
    const all = [...this.#connections.values()];
    this.#connections.clear();
    await Promise.all(all.map((p) => p.then((c) => c.client.close()).catch(() => {})));
  }

  #connect(tenant: string, server: McpToolServer, limits: ToolLimits): Promise<Connection> {
    const key = connectionKey(tenant, server);
    let c = this.#connections.get(key);
    if (!c) {
      c = (async () => {
        // Loaded when a tenant first calls an MCP server's tool: the SDK (and zod) cost every worker, and every
        // process that starts one, a quarter of a second of CPU at start-up otherwise.
        const [{ Client }, { StreamableHTTPClientTransport }] = await Promise.all([
          import('@modelcontextprotocol/sdk/client/index.js'),
          import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
        ]);
        const client = new Client({ name: this.#name, version: '1' });
        const transport = new StreamableHTTPClientTransport(new URL(server.mcp_url), {
          requestInit: { headers: server.headers ?? {} },
        });
        await client.connect(transport, { timeout: limits.timeoutMs });
        return { client };
      })();
      c.catch(() => this.#connections.delete(key));
      this.#connections.set(key, c);
    }
    return c;
  }

  #forget(tenant: string, server: McpToolServer): void {
    const key = connectionKey(tenant, server);
    const c = this.#connections.get(key);
    this.#connections.delete(key);
    void c?.then((x) => x.client.close()).catch(() => {});
  }
}

const connectionKey = (tenant: string, server: McpToolServer): string =>
  JSON.stringify([tenant, server.mcp_url, server.headers ?? {}]);

/** A tool as a tenant sees it: HTTP tools by their name, an MCP server's by `<server>.<tool>`. */
export interface OfferedTool {
  name: string;
  description: string | null;
  input_schema: Record<string, unknown> | null;
}

/** Makes the calls and lists of a tenant's tools, whichever kind they are (HTTP endpoints, MCP servers). */
export class ToolCaller {
  readonly #mcp = new McpToolClients();

  /** Calls `name` for `tenant`, one of whose tools `tools` are; undefined when it has no such tool. */
  async call(
    tenant: string,
    tools: Record<string, ToolSource>,
    name: string,
    args: unknown,
    limits: ToolLimits,
  ): Promise<ToolAnswer | undefined> {
    const found = resolveTool(tools, name);
    if (found === undefined) return undefined;
    if ('http' in found) return callHttpTool(found.http, args, limits);
    return this.#mcp.call(tenant, found.server, found.tool, args, limits);
  }

  /** The tools offered to `tenant`, by name; an MCP server that cannot be listed is reported to `failed`, left out. */
  async list(
    tenant: string,
    tools: Record<string, ToolSource>,
    limits: ToolLimits,
    failed: (server: string, err: unknown) => void = () => {},
  ): Promise<OfferedTool[]> {
    const lists = await Promise.all(
      Object.entries(tools).map(async ([name, source]): Promise<OfferedTool[]> => {
        if (!isMcpServer(source)) {
          return [{ name, description: source.description ?? null, input_schema: source.input_schema ?? null }];
        }
        try {
          return (await this.#mcp.list(tenant, source, limits)).map((t) => ({ ...t, name: `${name}.${t.name}` }));
        } catch (err) {
          failed(name, err);
          return [];
        }
      }),
    );
    return lists.flat().sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** Names to tell a caller who asked for one that is not there: HTTP tools, and `<server>.*` for MCP servers. */
  static offered(tools: Record<string, ToolSource>): string {
    return Object.entries(tools)
      .map(([name, source]) => (isMcpServer(source) ? `${name}.*` : name))
      .sort()
      .join(', ');
  }

  close(): Promise<void> {
    return this.#mcp.close();
  }
}
