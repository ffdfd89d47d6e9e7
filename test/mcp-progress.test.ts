import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import { buildApp, createGatewayDeps } from '@sandgate/gateway';
import { startStack, until, type Stack } from './harness.ts';
import { initializeMessage, mcpClient, rawMcp, toolsOf } from './mcp-client.ts';

/** Python that prints `first`, then waits for a file named `go` before printing `second`. */
const WAIT_FOR_GO = [
  'import os, time',
  "print('first', flush=True)",
  "while not os.path.exists('go'):",
  '    time.sleep(0.05)',
  "print('second')",
].join('\n');
const release = (s: Stack, session: string, headers: Record<string, string> = {}) =>
  fetch(`${s.url}/v1/sessions/${session}/files/go`, { method: 'PUT', body: '', headers });
const runCall = (id: number, args: Record<string, unknown>, meta?: Record<string, unknown>) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: 'run_python', arguments: args, ...(meta ? { _meta: meta } : {}) },
});
const cancelCall = (requestId: number) => ({
  jsonrpc: '2.0',
  method: 'notifications/cancelled',
  params: { requestId },
});
const lastRun = async (s: Stack, session: string, headers: Record<string, string> = {}) =>
  (await s.api('GET', `/v1/executions?session_id=${session}`, undefined, headers)).body.executions[0];

test('MCP progress notifications and cancellation', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const { client } = await mcpClient(s);
  t.after(() => client.close());
  const { call, ok } = toolsOf(client);
  const session = (await ok('create_session', {})).session_id as string;

  await t.test('a run sends its phases and output as progress while it is in flight', async () => {
    const seen: Progress[] = [];
    const out = await ok(
      'run_python',
      { session_id: session, code: WAIT_FOR_GO },
      {
        onprogress: (p) => {
          seen.push(p);
          // The run is still waiting: only this output, sent while it is in flight, lets it finish.
          if (p.message === 'stdout: first\n') void release(s, session);
        },
      },
    );
    assert.equal(out.stdout, 'first\nsecond\n');
    const messages = seen.map((p) => p.message);
    assert.ok(messages.indexOf('phase: running') < messages.indexOf('stdout: first\n'), messages.join(' | '));
    assert.ok(messages.includes('stdout: second\n'));
    assert.equal(messages.at(-1), 'phase: done');
    assert.deepEqual(
      seen.map((p) => p.progress),
      seen.map((_, i) => i + 1),
      'progress only grows',
    );
  });

  await t.test('without a progressToken no progress is sent; with one, before the result', async () => {
    const plain = await rawMcp(s.url, runCall(1, { session_id: session, code: 'print(1)' }));
    assert.deepEqual(
      plain.messages.map((m) => m.method ?? `result ${String(m.id)}`),
      ['result 1'],
    );
    const asked = await rawMcp(s.url, runCall(2, { session_id: session, code: 'print(1)' }, { progressToken: 'tok' }));
    const progress = asked.messages.filter((m) => m.method === 'notifications/progress');
    assert.ok(progress.length >= 3, JSON.stringify(asked.messages));
    assert.ok(progress.every((m) => m.params.progressToken === 'tok'));
    assert.equal(asked.messages.at(-1)!.id, 2);
  });

  await t.test('cancelling the request (notifications/cancelled) cancels the run; the session is free', async () => {
    const ac = new AbortController();
    const code = "import time\nprint('started', flush=True)\ntime.sleep(600)";
    const running = call(
      'run_python',
      { session_id: session, code },
      {
        signal: ac.signal,
        onprogress: (p) => {
          if (p.message === 'stdout: started\n') ac.abort('enough');
        },
      },
    );
    await assert.rejects(running);
    const run = await until('the run to be cancelled', async () => {
      const r = await lastRun(s, session);
      return r.state === 'cancelled' ? r : null;
    });
    assert.equal(run.result.reason, 'cancelled');
    assert.equal((await s.api('GET', `/v1/sessions/${session}`)).body.state, 'idle');
    assert.equal((await ok('run_python', { session_id: session, code: 'print(2)' })).stdout, '2\n');
  });

  await t.test('a cancel that comes before its call still cancels the run the call starts (16 per POST)', async () => {
    const init = await rawMcp(s.url, initializeMessage());
    const headers = { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-06-18' };
    assert.equal((await rawMcp(s.url, cancelCall(42), headers)).status, 202);
    const r = await rawMcp(s.url, runCall(42, { session_id: session, code: 'import time\ntime.sleep(600)' }), headers);
    const out = r.messages.at(-1)!.result.structuredContent;
    assert.equal(out.state, 'cancelled');
    assert.equal(out.exit_code, -1);

    // One POST acts on at most 16 cancels: the 17th of a batch is not honoured.
    const batch = [...Array.from({ length: 16 }, (_, i) => cancelCall(100 + i)), cancelCall(43)];
    assert.equal((await rawMcp(s.url, batch, headers)).status, 202);
    const kept = await rawMcp(s.url, runCall(43, { session_id: session, code: 'print(43)' }), headers);
    assert.equal(kept.messages.at(-1)!.result.structuredContent.stdout, '43\n');
  });
});

test('MCP cancellation from another gateway replica, and never across tenants', async (t) => {
  const KEY_A = 'tenant-a-key-0123456789';
  const KEY_B = 'tenant-b-key-0123456789';
  const s = await startStack({ apiKey: KEY_A, env: { SANDGATE_API_KEYS: `${KEY_A}:tenantA,${KEY_B}:tenantB` } });
  t.after(() => s.close());
  const deps2 = await createGatewayDeps(s.config, pino({ level: 'silent' }));
  const replica = await buildApp(deps2);
  const url2 = await replica.listen({ host: '127.0.0.1', port: 0 });
  t.after(async () => {
    await replica.close();
    await deps2.close();
  });

  const a = { authorization: `Bearer ${KEY_A}` };
  const mcpSession = (await rawMcp(s.url, initializeMessage(), a)).headers.get('mcp-session-id')!;
  const headersA = { ...a, 'mcp-session-id': mcpSession, 'mcp-protocol-version': '2025-06-18' };
  const open = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'create_session', arguments: {} } };
  const session = (await rawMcp(url2, open, headersA)).messages[0]!.result.structuredContent.session_id as string;
  const running = () => until('the run to start', async () => (await lastRun(s, session, a))?.state === 'running');

  await t.test("tenant B sending A's session id and request id cancels nothing", async () => {
    const call = rawMcp(s.url, runCall(5, { session_id: session, code: WAIT_FOR_GO }), headersA);
    await running();
    const b = { authorization: `Bearer ${KEY_B}`, 'mcp-session-id': mcpSession };
    assert.equal((await rawMcp(url2, cancelCall(5), b)).status, 202);
    assert.equal((await release(s, session, a)).status, 201);
    const out = (await call).messages.at(-1)!.result.structuredContent;
    assert.equal(out.state, 'completed');
    assert.equal(out.stdout, 'first\nsecond\n');
  });

  await t.test("tenant A's cancel, sent to the other replica, cancels the run", async () => {
    await fetch(`${s.url}/v1/sessions/${session}/files/go`, { method: 'DELETE', headers: a });
    const call = rawMcp(s.url, runCall(6, { session_id: session, code: WAIT_FOR_GO }), headersA);
    await running();
    assert.equal((await rawMcp(url2, cancelCall(6), headersA)).status, 202);
    const out = (await call).messages.at(-1)!.result.structuredContent;
    assert.equal(out.state, 'cancelled');
    assert.equal((await lastRun(s, session, a)).result.reason, 'cancelled');
  });
});
