/**
 * mcp-session: run_python print(1) over MCP (the SDK's client, Streamable HTTP, one POST per call) in a process
 * session, interleaved with the same run through POST /v1/executions?wait=30 in another session of the same stack.
 * The ratio is what the MCP layer (a fresh MCP server per request, SSE reply, event-stream follow) costs over the
 * REST path. Also the p50 of a plain POST of tools/list, which never touches a sandbox (timed with fetch: the SDK
 * client's listTools() adds ~20 ms of its own here, compiling a validator for every output schema). Reported.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createSession, runWait } from './lib/api.ts';
import { N, WARMUP } from './lib/knobs.ts';
import { main } from './lib/main.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { emit, emitError, round, summarize } from './lib/stats.ts';

const BENCH = 'mcp-session';
const TARGET = 'none (reported)';
const LIST = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
const LIST_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

main(async () => {
  let stack: Stack | null = null;
  let client: Client | null = null;
  try {
    stack = await startStack(['standalone'], { SANDGATE_MAX_SESSIONS: '100000' });
    client = new Client({ name: 'sandgate-bench', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), { requestInit: { headers: stack.headers } }),
    );
    const opened = await client.callTool({ name: 'create_session', arguments: {} });
    const mcpSession = (opened.structuredContent as { session_id: string }).session_id;
    const restSession = (await createSession(stack)).id as string;
    const mcpRun = async () => {
      const t0 = performance.now();
      const r = await client!.callTool({ name: 'run_python', arguments: { session_id: mcpSession, code: 'print(1)' } });
      const ms = performance.now() - t0;
      const out = r.structuredContent as { stdout?: string };
      if (r.isError || out.stdout !== '1\n') throw new Error(`run_python: ${JSON.stringify(r.structuredContent)}`);
      return ms;
    };
    const restRun = async () =>
      (await runWait(stack!, { session_id: restSession, language: 'python', code: 'print(1)' })).ms;
    for (let i = 0; i < WARMUP; i++) {
      await mcpRun();
      await restRun();
    }
    const mcp: number[] = [];
    const rest: number[] = [];
    const list: number[] = [];
    for (let i = 0; i < N; i++) {
      mcp.push(await mcpRun());
      rest.push(await restRun());
      const t0 = performance.now();
      const listed = await fetch(`${stack.url}/mcp`, {
        method: 'POST',
        headers: { ...LIST_HEADERS, ...stack.headers },
        body: LIST,
      });
      if (!(await listed.text()).includes('"run_python"')) throw new Error(`tools/list answered ${listed.status}`);
      list.push(performance.now() - t0);
    }
    const m = summarize(mcp);
    const r = summarize(rest);
    emit({
      bench: BENCH,
      ...m,
      rest_p50_ms: r.p50_ms,
      ratio: round(m.p50_ms / r.p50_ms),
      tools_list_p50_ms: summarize(list).p50_ms,
      target: TARGET,
      pass: true,
    });
  } catch (e) {
    emitError(BENCH, TARGET, e);
  } finally {
    await client?.close().catch(() => {});
    await stack?.close();
  }
});
