import { test } from 'node:test';
import assert from 'node:assert/strict';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { startStack, until } from './harness.ts';
import { b64, mcpClient, rawMcp, toolsOf } from './mcp-client.ts';

test('MCP tool errors carry the contract codes, with isError and a structured error object', async (t) => {
  const s = await startStack({
    env: {
      SANDGATE_MAX_SESSIONS: '3',
      SANDGATE_MAX_ARTIFACT_READ_BYTES: '2000',
      SANDGATE_MAX_CODE_BYTES: '2000',
      SANDGATE_MAX_UPLOAD_BYTES: '5000',
    },
  });
  t.after(() => s.close());
  const { client } = await mcpClient(s);
  t.after(() => client.close());
  const { call, ok, fail } = toolsOf(client);
  const liveSessions = async () => (await s.api('GET', '/v1/sessions')).body.sessions.length as number;
  const session = (await ok('upload_file', { filename: 'sales.csv', content_base64: b64('a,b\n1,2\n') })).session_id;
  const inSession = (args: Record<string, unknown>) => ({ session_id: session, ...args });

  await t.test('file_exists, and overwrite=true replaces the file', async () => {
    assert.deepEqual(await fail('upload_file', inSession({ filename: 'sales.csv', content_base64: b64('x') })), {
      error: 'file_exists',
      message: 'sales.csv already exists. Set overwrite=true to replace.',
      session_id: session,
    });
    await ok('upload_file', inSession({ filename: 'sales.csv', content_base64: b64('new\n'), overwrite: true }));
    const read = await ok('read_artifact', inSession({ path: 'sales.csv' }));
    assert.equal(Buffer.from(read.content_base64, 'base64').toString(), 'new\n');
  });

  await t.test('session_not_found for an unknown or malformed session', async () => {
    assert.deepEqual(await fail('list_artifacts', { session_id: 'sess_123' }), {
      error: 'session_not_found',
      message: 'No active session with id sess_123',
      session_id: 'sess_123',
    });
    const unknown = { session_id: 'sess_0123456789ab' };
    for (const [tool, args] of [
      ['read_artifact', { path: 'a' }],
      ['run_python', { code: '1' }],
      ['upload_file', { filename: 'a', content_base64: '' }],
    ] as const) {
      assert.equal((await fail(tool, { ...unknown, ...args })).error, 'session_not_found', tool);
    }
  });

  await t.test('not_found for a missing artifact, and for a symlink the sandbox planted (never followed)', async () => {
    assert.deepEqual(await fail('read_artifact', inSession({ path: '/mnt/data/chart.png' })), {
      error: 'not_found',
      message: 'No artifact at /mnt/data/chart.png',
      session_id: session,
    });
    const run = await ok('run_code', inSession({ language: 'bash', code: 'ln -s /etc/passwd pw && ls -l pw' }));
    assert.equal(run.exit_code, 0, run.stderr);
    assert.equal((await fail('read_artifact', inSession({ path: 'pw' }))).error, 'not_found');
    const listed = (await ok('list_artifacts', inSession({}))).artifacts.map((a: { path: string }) => a.path);
    assert.ok(!listed.includes('/mnt/data/pw'), 'a symlink is not listed either');
  });

  await t.test('artifact_too_large past the read limit, with its size_bytes and a download_url', async () => {
    const big = Buffer.alloc(3000, 7);
    await ok('upload_file', inSession({ filename: 'big.bin', content_base64: b64(big) }));
    const e = await fail('read_artifact', inSession({ path: 'big.bin' }));
    assert.equal(e.error, 'artifact_too_large');
    assert.equal(e.message, 'big.bin is 3KB, exceeds 2KB limit. Use download_url instead.');
    assert.equal(e.size_bytes, 3000);
    assert.deepEqual(Buffer.from(await (await fetch(e.download_url)).arrayBuffer()), big);

    const code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.savefig('line.png')";
    const chart = await call('run_python', inSession({ code }));
    const png = (chart.structuredContent as { artifacts: { filename: string; size_bytes: number }[] }).artifacts.find(
      (a) => a.filename === 'line.png',
    );
    assert.ok(png!.size_bytes > 2000, 'the chart is over the limit');
    assert.equal(chart.content.filter((c) => c.type === 'image').length, 0, 'so it is listed but not sent as an image');
  });

  await t.test('session_busy while a run holds the session; the run then completes', async () => {
    const code = "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)\nprint('went')";
    const waiting = ok('run_python', inSession({ code }));
    const busy = async () => (await s.api('GET', `/v1/sessions/${session}`)).body.state === 'busy';
    await until('the session to be busy', busy);
    assert.deepEqual(await fail('run_python', inSession({ code: 'print(1)' })), {
      error: 'session_busy',
      message: 'A run is already in progress for this session. Wait for it to complete.',
      session_id: session,
    });
    await ok('upload_file', inSession({ filename: 'go', content_base64: '' }));
    assert.equal((await waiting).stdout, 'went\n');
  });

  await t.test('invalid_path: traversal and paths outside /mnt/data are refused; sub-directories work', async () => {
    const invalid = async (tool: string, args: Record<string, unknown>) =>
      assert.equal((await fail(tool, inSession(args))).error, 'invalid_path', JSON.stringify(args));
    await invalid('upload_file', { filename: '../escape.txt', content_base64: b64('x') });
    await invalid('read_artifact', { path: '/etc/passwd' });
    await invalid('read_artifact', { path: '/mnt/data/../../etc/passwd' });
    const nested = await ok('upload_file', inSession({ filename: '/mnt/data/sub/ok.txt', content_base64: b64('ok') }));
    assert.equal(nested.path, '/mnt/data/sub/ok.txt');
  });

  await t.test('validation_failed and unsupported_language for bad arguments', async () => {
    const invalid = async (tool: string, args: Record<string, unknown>) => {
      const e = await fail(tool, inSession(args));
      assert.equal(e.error, 'validation_failed', JSON.stringify(args));
      return e.message as string;
    };
    assert.match(await invalid('run_python', {}), /^code: /);
    assert.match(await invalid('run_python', { code: '1', timeout: 5 }), /^timeout: /);
    await invalid('upload_file', { filename: 'x', content_base64: '***' });
    await invalid('upload_file', { filename: 'x', content_base64: '', overwrite: 'yes' });
    const e = await fail('run_code', inSession({ language: 'ruby', code: 'puts 1' }));
    assert.equal(e.error, 'unsupported_language');
    assert.match(e.message, /python, javascript, typescript, bash/);
  });

  await t.test('payload_too_large over the code and upload limits; a failed call closes its new session', async () => {
    const before = await liveSessions();
    assert.equal((await fail('run_python', { code: `# ${'x'.repeat(2000)}` })).error, 'payload_too_large');
    const tooBig = { filename: 'big', content_base64: b64(Buffer.alloc(5001)) };
    assert.equal((await fail('upload_file', tooBig)).error, 'payload_too_large');
    assert.equal(await liveSessions(), before, 'no session is left behind by a failed call');
    const huge = { name: 'upload_file', arguments: { filename: 'x', content_base64: 'A'.repeat(100_000) } };
    const r = await rawMcp(s.url, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: huge });
    assert.equal(r.status, 413, 'a body over the /mcp limit is refused before it is parsed');
    assert.equal((r.body as { code: string }).code, 'payload_too_large');
  });

  await t.test('max_sessions when a call would open one session too many', async () => {
    const opened: string[] = [];
    while ((await liveSessions()) < 3) opened.push((await ok('create_session', {})).session_id);
    const expected = {
      error: 'max_sessions',
      message: 'Maximum 3 concurrent sessions reached. Close an existing session first.',
    };
    assert.deepEqual(await fail('run_python', { code: 'print(1)' }), expected);
    assert.deepEqual(await fail('upload_file', { filename: 'a', content_base64: '' }), expected);
    assert.deepEqual(await fail('create_session', { mode: 'stateful' }), expected);
    for (const id of opened) await ok('close_session', { session_id: id });
  });

  await t.test('an unknown tool is a protocol error (-32602), not a tool result', async () => {
    await assert.rejects(call('no_such_tool', {}), (e: unknown) => e instanceof McpError && e.code === -32602);
  });
});

test("MCP run_python past the time limit: exit_code -1 and the contract's timeout message", async (t) => {
  const s = await startStack({ env: { SANDGATE_EXEC_TIMEOUT_S: '1' } });
  t.after(() => s.close());
  const { client } = await mcpClient(s);
  t.after(() => client.close());
  const code = "import time\nprint('begun', flush=True)\ntime.sleep(30)";
  const out = await toolsOf(client).ok('run_python', { code });
  assert.equal(out.state, 'timeout');
  assert.equal(out.exit_code, -1);
  assert.match(out.stderr, /Execution timed out after 1 seconds$/);
  assert.deepEqual(out.artifacts, []);
});
