import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
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
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const structured = (r: unknown): any => (r as CallToolResult).structuredContent;
