import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createParser } from 'eventsource-parser';
import type { Stack } from './harness.ts';

export interface McpClientOptions {
  apiKey?: string;
  headers?: Record<string, string>;
}

/** The MCP SDK's own client, connected to a stack's /mcp over real HTTP. */
export async function mcpClient(stack: Stack, { apiKey, headers = {} }: McpClientOptions = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
    requestInit: { headers: { ...headers, ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) } },
  });
  const client = new Client({ name: 'sandgate-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

/** A tool's structured result, typed loosely for assertions. */
export const structured = (r: unknown): any => (r as CallToolResult).structuredContent;

/** Short ways to call a tool: the whole result, a success's object, or a failure's error object. */
export function toolsOf(client: Client) {
  const call = async (name: string, args: Record<string, unknown>, options?: RequestOptions) =>
    (await client.callTool({ name, arguments: args }, undefined, options)) as CallToolResult;
  return {
    call,
    async ok(name: string, args: Record<string, unknown>, options?: RequestOptions) {
      const r = await call(name, args, options);
      assert.equal(r.isError, undefined, `${name}: ${JSON.stringify(r.structuredContent)}`);
      return structured(r);
    },
    async fail(name: string, args: Record<string, unknown>) {
      const r = await call(name, args);
      assert.equal(r.isError, true, `${name} should fail: ${JSON.stringify(r.structuredContent)}`);
      return structured(r);
    },
  };
}

export const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');

export interface RawReply {
  status: number;
  headers: Headers;
  /** JSON-RPC messages of the reply, from its SSE stream or JSON body. */
  messages: { id?: unknown; method?: string; params?: any; result?: any; error?: any }[];
  /** The body when it is neither: a problem+json object, or text. */
  body: unknown;
}

/** One JSON-RPC POST to /mcp by hand, for what the SDK client does not let a test choose (ids, headers, order). */
export async function rawMcp(url: string, message: unknown, headers: Record<string, string> = {}): Promise<RawReply> {
  const res = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(message),
  });
  const text = await res.text();
  const type = res.headers.get('content-type') ?? '';
  const messages: RawReply['messages'] = [];
  if (type.startsWith('text/event-stream')) {
    const parser = createParser({
      onEvent: (ev) => {
        if (ev.data) messages.push(JSON.parse(ev.data));
      },
    });
    parser.feed(text);
  } else if (type.startsWith('application/json') && text) {
    messages.push(...[JSON.parse(text)].flat());
  }
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, messages, body };
}

export const initializeMessage = (id: number | string = 0) => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});
