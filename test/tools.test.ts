import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { Server as McpServer } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { startStack, type Stack } from './harness.ts';
import { readSse } from './sse-client.ts';
import { mcpClient, structured } from './mcp-client.ts';

/**
 * Tool calls from sandboxed code (sandgate.tools): the operator offers tools per tenant (SANDGATE_TOOLS), code calls
 * them through the runtime image's library over the run's own channel, and the worker makes the HTTP call — the
 * sandbox still reaches no network. The tools are served by a server this test starts on loopback.
 */

const KEY_A = 'a'.repeat(32);
const KEY_B = 'b'.repeat(32);

interface Seen {
  path: string;
  body: unknown;
  apiKey: string | undefined;
}

async function toolServer(): Promise<{ server: Server; url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const read = async (req: IncomingMessage) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    return body ? (JSON.parse(body) as unknown) : null;
  };
  const server = createServer((req, res) => {
    void read(req).then((body) => {
      seen.push({ path: req.url ?? '', body, apiKey: req.headers['x-api-key'] as string | undefined });
      const json = (status: number, value: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      if (req.url === '/weather') return json(200, { city: (body as { city: string }).city, temperature_c: 7 });
      if (req.url === '/echo') return json(200, { echo: body });
      if (req.url === '/clock') return json(200, { now: '2026-11-25T00:00:00Z' });
      if (req.url === '/big') return json(200, { blob: 'x'.repeat(10_000) });
      if (req.url === '/broken') return json(500, { error: 'it broke' });
      if (req.url === '/slow') return void setTimeout(() => json(200, { late: true }), 3000);
      json(404, {});
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen };
}

/**
 * A remote MCP server (streamable HTTP, with MCP sessions) with two tools: `add` and `fail`. `calls` holds the MCP
 * session of every tools/call, so that a test can tell which connection made it.
 */
async function mcpToolServer(): Promise<{ server: Server; url: string; calls: { session: string; args: unknown }[] }> {
  const calls: { session: string; args: unknown }[] = [];
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const connect = async (): Promise<StreamableHTTPServerTransport> => {
    const mcp = new McpServer({ name: 'test-tools', version: '1' }, { capabilities: { tools: {} } });
    mcp.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [
        {
          name: 'add',
          description: 'a + b',
          inputSchema: {
            type: 'object',
            required: ['a', 'b'],
            properties: { a: { type: 'number' }, b: { type: 'number' } },
          },
        },
        { name: 'fail', description: 'always fails', inputSchema: { type: 'object' } },
      ],
    }));
    mcp.setRequestHandler(CallToolRequestSchema, async (r, extra) => {
      calls.push({ session: extra.sessionId ?? '', args: r.params.arguments });
      if (r.params.name === 'fail') return { isError: true, content: [{ type: 'text', text: 'it failed on purpose' }] };
      const { a, b } = r.params.arguments as { a: number; b: number };
      return { content: [{ type: 'text', text: String(a + b) }], structuredContent: { sum: a + b } };
    });
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void transports.set(id, transport),
    });
    transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
    await mcp.connect(transport);
    return transport;
  };
  const server = createServer((req, res) => {
    const id = req.headers['mcp-session-id'];
    const known = typeof id === 'string' ? transports.get(id) : undefined;
    if (typeof id === 'string' && known === undefined) return void res.writeHead(404).end();
    void (known ? Promise.resolve(known) : connect()).then((t) => t.handleRequest(req, res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`, calls };
}

const registry = (url: string, mcpUrl: string) =>
  JSON.stringify({
    acme: {
      'weather.get': {
        url: `${url}/weather`,
        description: 'The weather in a city now',
        input_schema: {
          type: 'object',
          required: ['city'],
          properties: { city: { type: 'string' } },
          additionalProperties: false,
        },
        headers: { 'x-api-key': 'the-operators-secret' },
      },
      echo: { url: `${url}/echo` },
      big: { url: `${url}/big` },
      broken: { url: `${url}/broken` },
      slow: { url: `${url}/slow` },
      math: { mcp_url: mcpUrl },
    },
    // The same MCP server for another tenant: each tenant gets a connection (an MCP session) of its own.
    globex: { math: { mcp_url: mcpUrl } },
    '*': { 'clock.now': { url: `${url}/clock` } },
  });

const run = async (s: Stack, key: string, body: Record<string, unknown>) => {
  const res = await s.api(
    'POST',
    '/v1/executions?wait=60',
    { language: 'python', ...body },
    {
      authorization: `Bearer ${key}`,
    },
  );
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body as { id: string; links: { events: string }; result: Record<string, any> };
};

test("tools: sandboxed code calls the tenant's tools through the worker, bounded, as events, with no network", async (t) => {
  const tools = await toolServer();
  t.after(() => tools.server.close());
  const mcp = await mcpToolServer();
  t.after(() => mcp.server.close());
  const s = await startStack({
    env: {
      SANDGATE_API_KEYS: `${KEY_A}:acme,${KEY_B}:globex`,
      SANDGATE_TOOLS: registry(tools.url, mcp.url),
      SANDGATE_TOOL_MAX_CALLS: '5',
      SANDGATE_TOOL_TIMEOUT_S: '1',
      SANDGATE_TOOL_MAX_RESPONSE_BYTES: '1KB',
    },
  });
  t.after(() => s.close());

  await t.test(
    "python: tools.weather.get(city=...) returns the answer; the operator's header never reaches the code",
    async () => {
      const r = await run(s, KEY_A, {
        code: [
          'import json, os',
          'from sandgate import tools',
          'print(json.dumps(tools.weather.get(city="Oslo")))',
          'print(sorted(k for k in os.environ if "KEY" in k or "SECRET" in k))',
        ].join('\n'),
      });
      assert.equal(r.result.state, 'completed', r.result.stderr);
      assert.deepEqual(r.result.stdout.split('\n').slice(0, 2), ['{"city": "Oslo", "temperature_c": 7}', '[]']);
      assert.deepEqual(tools.seen.at(-1), { path: '/weather', body: { city: 'Oslo' }, apiKey: 'the-operators-secret' });
      assert.deepEqual(
        r.result.tool_calls.map((c: any) => [c.name, c.ok]),
        [['weather.get', true]],
      );
      // The events: each call and its answer, before the result.
      const { events } = await readSse(r.links.events, { headers: { authorization: `Bearer ${KEY_A}` } });
      const calls = events.filter((e) => e.event === 'tool_call' || e.event === 'tool_result');
      assert.deepEqual(
        calls.map((e) => [e.event, JSON.parse(e.data).name]),
        [
          ['tool_call', 'weather.get'],
          ['tool_result', 'weather.get'],
        ],
      );
      assert.deepEqual(JSON.parse(calls[0]!.data).args, { city: 'Oslo' });
      assert.deepEqual(JSON.parse(calls[1]!.data).result, { city: 'Oslo', temperature_c: 7 });
    },
  );

  await t.test('each call is checked: an unknown tool, bad arguments, a failing tool; all are ToolErrors', async () => {
    const r = await run(s, KEY_A, {
      code: [
        'from sandgate import tools, ToolError',
        'for call in (lambda: tools.nope(), lambda: tools.weather.get(town="Oslo"), lambda: tools.broken(),',
        '             lambda: tools.big(), lambda: tools.slow()):',
        '    try:',
        '        call()',
        '    except ToolError as e:',
        '        print("ToolError:", str(e)[:80])',
      ].join('\n'),
      timeout_ms: 30_000,
    });
    assert.equal(r.result.state, 'completed', r.result.stderr);
    const lines = r.result.stdout.trim().split('\n');
    assert.match(
      lines[0],
      /^ToolError: no tool "nope" for this tenant; its tools: big, broken, clock\.now, echo, math\.\*/,
    );
    assert.match(lines[1], /^ToolError: invalid arguments: .*city/);
    assert.match(lines[2], /^ToolError: the tool answered 500/);
    assert.match(lines[3], /^ToolError: the answer is .*over the limit of 1000 bytes/);
    assert.match(lines[4], /^ToolError: the tool did not answer within 1000 ms/);
    assert.equal(r.result.tool_calls.length, 5, 'every call is recorded, the refused ones too');
    assert.deepEqual(
      r.result.tool_calls.map((c: any) => c.ok),
      [false, false, false, false, false],
    );
  });

  await t.test('a run makes at most SANDGATE_TOOL_MAX_CALLS calls', async () => {
    const r = await run(s, KEY_A, {
      code: [
        'from sandgate import tools, ToolError',
        'for i in range(6):',
        '    try:',
        '        tools.echo(i=i)',
        '        print("ok", i)',
        '    except ToolError as e:',
        '        print("refused", i, e)',
      ].join('\n'),
    });
    const lines = r.result.stdout.trim().split('\n');
    assert.deepEqual(lines.slice(0, 5), ['ok 0', 'ok 1', 'ok 2', 'ok 3', 'ok 4']);
    assert.match(lines[5], /^refused 5 this run has made its 5 tool calls/);
  });

  await t.test("tenants see their own tools only; a tool offered to all is everyone's", async () => {
    const r = await run(s, KEY_B, {
      code: [
        'from sandgate import tools, ToolError',
        'print(tools.clock.now()["now"])',
        'try:',
        '    tools.weather.get(city="Oslo")',
        'except ToolError as e:',
        '    print("ToolError:", e)',
      ].join('\n'),
    });
    assert.equal(r.result.stdout.split('\n')[0], '2026-11-25T00:00:00Z');
    assert.match(r.result.stdout, /ToolError: no tool "weather\.get" for this tenant; its tools: clock\.now/);
  });

  await t.test("a remote MCP server's tools, by <server>.<tool>: listed, called, checked, failing", async () => {
    const r = await run(s, KEY_A, {
      code: [
        'from sandgate import tools, ToolError',
        'print(tools.math.add(a=2, b=40))',
        'for call in (lambda: tools.math.add(a="x", b=1), lambda: tools.math.fail(), lambda: tools.math.nope()):',
        '    try:',
        '        call()',
        '    except ToolError as e:',
        '        print("ToolError:", str(e)[:60])',
      ].join('\n'),
    });
    assert.equal(r.result.state, 'completed', r.result.stderr);
    const lines = r.result.stdout.trim().split('\n');
    assert.equal(lines[0], "{'sum': 42}");
    assert.match(lines[1], /^ToolError: invalid arguments: .*a/);
    assert.equal(lines[2], 'ToolError: it failed on purpose');
    assert.equal(lines[3], 'ToolError: the MCP server lists no tool "nope"');
    const listed = await s.api('GET', '/v1/tools', undefined, { authorization: `Bearer ${KEY_A}` });
    const math = listed.body.tools.filter((x: any) => x.name.startsWith('math.'));
    assert.deepEqual(
      math.map((x: any) => [x.name, x.description]),
      [
        ['math.add', 'a + b'],
        ['math.fail', 'always fails'],
      ],
    );
    const fast = await s.api('POST', '/v1/tools/math.add', { a: 1, b: 2 }, { authorization: `Bearer ${KEY_A}` });
    assert.deepEqual([fast.body.ok, fast.body.result], [true, { sum: 3 }]);
  });

  await t.test('two tenants offered the same MCP server each have a session of their own with it', async () => {
    const calls = async (key: string, a: number) => {
      const fast = await s.api('POST', '/v1/tools/math.add', { a, b: 0 }, { authorization: `Bearer ${key}` });
      assert.deepEqual([fast.body.ok, fast.body.result], [true, { sum: a }], JSON.stringify(fast.body));
      const r = await run(s, key, { code: `from sandgate import tools\nprint(tools.math.add(a=${a + 1}, b=0))` });
      assert.equal(r.result.stdout, `{'sum': ${a + 1}}\n`, r.result.stderr);
    };
    await calls(KEY_A, 1000);
    await calls(KEY_B, 2000);
    await calls(KEY_A, 3000);
    const sessionOf = (a: number) => mcp.calls.find((c) => (c.args as { a: number }).a === a)!.session;
    // The gateway's calls (the fast path) and the worker's (from a run), per tenant.
    for (const [a, b] of [
      [1000, 2000],
      [1001, 2001],
    ] as const) {
      assert.ok(sessionOf(a) && sessionOf(b), JSON.stringify(mcp.calls));
      assert.notEqual(sessionOf(a), sessionOf(b), "another tenant's calls come over a session of their own");
    }
    assert.equal(sessionOf(3000), sessionOf(1000), "a tenant's connection is kept between its calls");
    assert.equal(sessionOf(3001), sessionOf(1001));
  });

  await t.test('javascript and typescript: the same library, awaited', async () => {
    const js = await run(s, KEY_A, {
      language: 'javascript',
      code: "const { tools } = require('sandgate');\ntools.echo({ n: 1 }).then((r) => console.log(JSON.stringify(r)));",
    });
    assert.equal(js.result.stdout, '{"echo":{"n":1}}\n', js.result.stderr);
    const ts = await run(s, KEY_A, {
      language: 'typescript',
      code: "import { tools } from 'sandgate';\nconst r: { city: string } = await tools.weather.get({ city: 'Bergen' });\nconsole.log(r.city);",
    });
    assert.equal(ts.result.stdout, 'Bergen\n', ts.result.stderr);
  });

  await t.test(
    'in a stateful session each cell has the channel; the sandbox itself still reaches nothing',
    async () => {
      const session = (await s.api('POST', '/v1/sessions', { mode: 'stateful' }, { authorization: `Bearer ${KEY_A}` }))
        .body.id as string;
      const first = await run(s, KEY_A, {
        session_id: session,
        code: 'from sandgate import tools\na = tools.echo(x=1)',
      });
      assert.equal(first.result.state, 'completed', first.result.stderr);
      const second = await run(s, KEY_A, {
        session_id: session,
        code: 'a["echo"]["x"] + tools.echo(x=2)["echo"]["x"]',
      });
      assert.equal(second.result.value, '3', second.result.stderr);
      const direct = await run(s, KEY_A, {
        session_id: session,
        code: `import urllib.request\ntry:\n    urllib.request.urlopen("${tools.url}/echo", timeout=3)\n    print("reached")\nexcept OSError as e:\n    print("no network:", type(e).__name__)`,
      });
      assert.match(direct.result.stdout, /^no network: /);
    },
  );

  await t.test("the fast path: one call with no sandbox; the list of the tenant's tools", async () => {
    const auth = { authorization: `Bearer ${KEY_A}` };
    const listed = await s.api('GET', '/v1/tools', undefined, auth);
    assert.deepEqual(
      listed.body.tools.map((x: any) => x.name),
      ['big', 'broken', 'clock.now', 'echo', 'math.add', 'math.fail', 'slow', 'weather.get'],
    );
    assert.deepEqual(listed.body.tools.at(-1).input_schema.required, ['city']);
    const called = await s.api('POST', '/v1/tools/weather.get', { city: 'Tromsø' }, auth);
    assert.equal(called.status, 200);
    assert.deepEqual([called.body.ok, called.body.result], [true, { city: 'Tromsø', temperature_c: 7 }]);
    const failed = await s.api('POST', '/v1/tools/broken', {}, auth);
    assert.deepEqual([failed.status, failed.body.ok], [200, false]);
    assert.equal((await s.api('POST', '/v1/tools/weather.get', { town: 'x' }, auth)).body.code, 'validation_failed');
    const other = await s.api('POST', '/v1/tools/weather.get', { city: 'x' }, { authorization: `Bearer ${KEY_B}` });
    assert.deepEqual([other.status, other.body.code], [404, 'tool_not_found']);
  });

  await t.test("over MCP: list_tools shows the tenant's tools, call_tool calls one with no sandbox", async () => {
    const { client } = await mcpClient(s, { apiKey: KEY_A });
    t.after(() => client.close());
    const listed = structured(await client.callTool({ name: 'list_tools', arguments: {} }));
    assert.deepEqual(
      listed.tools.map((x: { name: string }) => x.name),
      ['big', 'broken', 'clock.now', 'echo', 'math.add', 'math.fail', 'slow', 'weather.get'],
    );
    const called = await client.callTool({
      name: 'call_tool',
      arguments: { name: 'weather.get', arguments: { city: 'Oslo' } },
    });
    assert.notEqual(called.isError, true, JSON.stringify(called));
    assert.deepEqual(structured(called).result, { city: 'Oslo', temperature_c: 7 });
    const bad = await client.callTool({
      name: 'call_tool',
      arguments: { name: 'weather.get', arguments: { town: 'x' } },
    });
    assert.equal(bad.isError, true);
    assert.equal(structured(bad).error, 'validation_failed');
    const { client: other } = await mcpClient(s, { apiKey: KEY_B });
    t.after(() => other.close());
    const refused = await other.callTool({
      name: 'call_tool',
      arguments: { name: 'weather.get', arguments: { city: 'x' } },
    });
    assert.equal(refused.isError, true);
    assert.equal(structured(refused).error, 'tool_not_found');
  });
});

test('tools: a tenant without tools gets no channel, and the library says so', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const r = await s.api('POST', '/v1/executions?wait=60', {
    language: 'python',
    code: 'import os\nfrom sandgate import tools, ToolError\nprint("SANDGATE_TOOLS_FD" in os.environ)\ntry:\n    tools.x()\nexcept ToolError as e:\n    print(e)',
  });
  assert.equal(r.body.result.stdout, 'False\nno tools in this run: the operator offers this tenant none\n');
  assert.equal(r.body.result.tool_calls, undefined);
});
