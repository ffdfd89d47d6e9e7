import { test } from 'node:test';
import assert from 'node:assert/strict';
// The SDK release n8n 2.8.4's MCP Client node is built on, next to the one sandgate serves with.
import { Client } from 'mcp-sdk-n8n/client/index.js';
import { StreamableHTTPClientTransport } from 'mcp-sdk-n8n/client/streamableHttp.js';
import type { CallToolResult } from 'mcp-sdk-n8n/types.js';
import { startStack } from '../harness.ts';

const KEY = 'm'.repeat(32);

test("n8n's MCP client (SDK 1.25.2, as its MCP Client node uses it) lists sandgate's tools and runs code over /mcp", async (t) => {
  const s = await startStack({ env: { SANDGATE_API_KEYS: `${KEY}:n8n` } });
  t.after(() => s.close());
  const transport = new StreamableHTTPClientTransport(new URL(`${s.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${KEY}` } },
  });
  const client = new Client({ name: 'n8n-mcp-client-tool', version: '1.0.0' });
  await client.connect(transport);
  // n8n never ends its MCP session with a DELETE: sandgate keeps none to end (stateless), so nothing is left behind.
  t.after(() => client.close());

  const names = (await client.listTools()).tools.map((tool) => tool.name).sort();
  for (const name of ['close_session', 'list_artifacts', 'read_artifact', 'run_code', 'run_python', 'upload_file']) {
    assert.ok(names.includes(name), `${name} in ${names.join(', ')}`);
  }
  const uploaded = (await client.callTool({
    name: 'upload_file',
    arguments: { filename: 'n.csv', content_base64: Buffer.from('a,b\n1,2\n3,4\n').toString('base64') },
  })) as CallToolResult;
  assert.equal(uploaded.isError, undefined, JSON.stringify(uploaded.structuredContent));
  const session = (uploaded.structuredContent as { session_id: string }).session_id;
  const ran = (await client.callTool({
    name: 'run_python',
    arguments: { session_id: session, code: 'import pandas as pd\nprint(pd.read_csv("n.csv")["b"].sum())' },
  })) as CallToolResult;
  assert.equal(ran.isError, undefined, JSON.stringify(ran.structuredContent));
  assert.equal((ran.structuredContent as { stdout: string }).stdout, '6\n');
  const text = ran.content.find((c) => c.type === 'text');
  assert.ok(
    text && text.type === 'text' && text.text.includes('6'),
    'the text content an agent reads carries the output',
  );

  const refused = new Client({ name: 'no-key', version: '1.0.0' });
  await assert.rejects(refused.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp`))), /401|nauthorized/);
});
