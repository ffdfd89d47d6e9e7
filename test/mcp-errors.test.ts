import { test } from 'node:test';
import assert from 'node:assert/strict';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startStack, until } from './harness.ts';
import { mcpClient, structured } from './mcp-client.ts';

const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');

test('MCP tool errors carry the contract codes, with isError and a structured error object', async (t) => {
  const s = await startStack({
    env: {
      SANDGATE_MAX_SESSIONS: '3', SANDGATE_MAX_ARTIFACT_READ_BYTES: '2000', SANDGATE_MAX_CODE_BYTES: '2000',
      SANDGATE_MAX_UPLOAD_BYTES: '5000',
    },
  });
  t.after(() => s.close());
  const { client } = await mcpClient(s);
  t.after(() => client.close());
  const call = (name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args });
  const failure = async (name: string, args: Record<string, unknown>) => {
    const r = await call(name, args);
    assert.equal(r.isError, true, `${name} should fail: ${JSON.stringify(r.structuredContent)}`);
    return structured(r);
  };
  const liveSessions = async () => (await s.api('GET', '/v1/sessions')).body.sessions.length as number;
  const session = structured(await call('upload_file', { filename: 'sales.csv', content_base64: b64('a,b\n1,2\n') })).session_id;

  await t.test('file_exists, and overwrite=true replaces the file', async () => {
    assert.deepEqual(await failure('upload_file', { session_id: session, filename: 'sales.csv', content_base64: b64('x') }), {
      error: 'file_exists', message: 'sales.csv already exists. Set overwrite=true to replace.', session_id: session,
    });
    const ok = await call('upload_file', { session_id: session, filename: 'sales.csv', content_base64: b64('new\n'), overwrite: true });
    assert.equal(ok.isError, undefined);
    const read = structured(await call('read_artifact', { session_id: session, path: 'sales.csv' }));
    assert.equal(Buffer.from(read.content_base64, 'base64').toString(), 'new\n');
  });

  await t.test('session_not_found for an unknown, malformed or closed session', async () => {
    assert.deepEqual(await failure('list_artifacts', { session_id: 'sess_123' }), {
      error: 'session_not_found', message: 'No active session with id sess_123', session_id: 'sess_123',
    });
    for (const [tool, extra] of [['read_artifact', { path: 'a' }], ['run_python', { code: '1' }], ['upload_file', { filename: 'a', content_base64: '' }]] as const) {
      assert.equal((await failure(tool, { session_id: 'sess_0123456789ab', ...extra })).error, 'session_not_found', tool);
    }
  });

  await t.test('not_found for a missing artifact, and for a symlink the sandbox planted (never followed)', async () => {
    assert.deepEqual(await failure('read_artifact', { session_id: session, path: '/mnt/data/chart.png' }), {
      error: 'not_found', message: 'No artifact at /mnt/data/chart.png', session_id: session,
    });
    const run = structured(await call('run_code', { session_id: session, language: 'bash', code: 'ln -s /etc/passwd pw && ls -l pw' }));
    assert.equal(run.exit_code, 0, run.stderr);
    assert.equal((await failure('read_artifact', { session_id: session, path: 'pw' })).error, 'not_found');
    const listed = structured(await call('list_artifacts', { session_id: session })).artifacts.map((a: { path: string }) => a.path);
    assert.ok(!listed.includes('/mnt/data/pw'), 'a symlink is not listed either');
  });

  await t.test('artifact_too_large past SANDGATE_MAX_ARTIFACT_READ_BYTES, with size_bytes and a download_url', async () => {
    const big = Buffer.alloc(3000, 7);
    await call('upload_file', { session_id: session, filename: 'big.bin', content_base64: b64(big) });
    const e = await failure('read_artifact', { session_id: session, path: 'big.bin' });
    assert.equal(e.error, 'artifact_too_large');
    assert.equal(e.message, 'big.bin is 3KB, exceeds 2KB limit. Use download_url instead.');
    assert.equal(e.size_bytes, 3000);
    assert.deepEqual(Buffer.from(await (await fetch(e.download_url)).arrayBuffer()), big);

    const chart = await call('run_python', {
      session_id: session, code: "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.savefig('line.png')",
    });
    const png = structured(chart).artifacts.find((a: { filename: string }) => a.filename === 'line.png');
    assert.ok(png.size_bytes > 2000, 'the chart is over the limit');
    assert.equal((chart as CallToolResult).content.filter((c) => c.type === 'image').length, 0, 'so it is listed but not sent as an image');
  });

  await t.test('session_busy while a run holds the session; the run then completes', async () => {
    const waiting = call('run_python', {
      session_id: session, code: "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)\nprint('went')",
    });
    await until('the session to be busy', async () => (await s.api('GET', `/v1/sessions/${session}`)).body.state === 'busy');
    assert.deepEqual(await failure('run_python', { session_id: session, code: 'print(1)' }), {
      error: 'session_busy', message: 'A run is already in progress for this session. Wait for it to complete.', session_id: session,
    });
    await call('upload_file', { session_id: session, filename: 'go', content_base64: '' });
    const out = structured(await waiting);
    assert.equal(out.stdout, 'went\n');
  });

  await t.test('invalid_path: traversal and absolute paths outside /mnt/data are refused; sub-directories work', async () => {
    assert.equal((await failure('upload_file', { session_id: session, filename: '../escape.txt', content_base64: b64('x') })).error, 'invalid_path');
    assert.equal((await failure('read_artifact', { session_id: session, path: '/etc/passwd' })).error, 'invalid_path');
    assert.equal((await failure('read_artifact', { session_id: session, path: '/mnt/data/../../etc/passwd' })).error, 'invalid_path');
    const ok = structured(await call('upload_file', { session_id: session, filename: '/mnt/data/sub/ok.txt', content_base64: b64('ok') }));
    assert.equal(ok.path, '/mnt/data/sub/ok.txt');
  });

  await t.test('validation_failed and unsupported_language for bad arguments', async () => {
    assert.match((await failure('run_python', { session_id: session })).message, /^code: /);
    assert.equal((await failure('run_python', { session_id: session, code: '1', timeout: 5 })).error, 'validation_failed');
    assert.equal((await failure('upload_file', { session_id: session, filename: 'x', content_base64: '***' })).error, 'validation_failed');
    assert.equal((await failure('upload_file', { session_id: session, filename: 'x', content_base64: '', overwrite: 'yes' })).error,
      'validation_failed');
    const e = await failure('run_code', { session_id: session, language: 'ruby', code: 'puts 1' });
    assert.equal(e.error, 'unsupported_language');
    assert.match(e.message, /python, javascript, bash/);
  });

  await t.test('payload_too_large for code and uploads over the limits; a call that opened a session closes it again', async () => {
    const before = await liveSessions();
    assert.equal((await failure('run_python', { code: `# ${'x'.repeat(2000)}` })).error, 'payload_too_large');
    assert.equal((await failure('upload_file', { filename: 'big', content_base64: b64(Buffer.alloc(5001)) })).error, 'payload_too_large');
    assert.equal(await liveSessions(), before, 'no session is left behind by a failed call');
    const res = await fetch(`${s.url}/mcp`, {
      method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'upload_file', arguments: { filename: 'x', content_base64: 'A'.repeat(100_000) } } }),
    });
    assert.equal(res.status, 413, 'a body over the /mcp limit is refused before it is parsed');
    assert.equal(((await res.json()) as { code: string }).code, 'payload_too_large');
  });

  await t.test('max_sessions when a call would open one session too many', async () => {
    const opened: string[] = [];
    while (await liveSessions() < 3) opened.push(structured(await call('create_session', {})).session_id);
    const expected = { error: 'max_sessions', message: 'Maximum 3 concurrent sessions reached. Close an existing session first.' };
    assert.deepEqual(await failure('run_python', { code: 'print(1)' }), expected);
    assert.deepEqual(await failure('upload_file', { filename: 'a', content_base64: '' }), expected);
    assert.deepEqual(await failure('create_session', { mode: 'stateful' }), expected);
    for (const id of opened) await call('close_session', { session_id: id });
  });

  await t.test('an unknown tool is a protocol error (-32602), not a tool result', async () => {
    await assert.rejects(call('no_such_tool', {}), (e: unknown) => e instanceof McpError && e.code === -32602);
  });
});

test('MCP run_python past the time limit: exit_code -1 and the contract\'s timeout message', async (t) => {
  const s = await startStack({ env: { SANDGATE_EXEC_TIMEOUT_S: '1' } });
  t.after(() => s.close());
  const { client } = await mcpClient(s);
  t.after(() => client.close());
  const out = structured(await client.callTool({
    name: 'run_python', arguments: { code: "import time\nprint('begun', flush=True)\ntime.sleep(30)" },
  }));
  assert.equal(out.state, 'timeout');
  assert.equal(out.exit_code, -1);
  assert.match(out.stderr, /Execution timed out after 1 seconds$/);
  assert.deepEqual(out.artifacts, []);
});
