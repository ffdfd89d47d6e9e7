import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import type { CallToolResult, ImageContent } from '@modelcontextprotocol/sdk/types.js';
import { startStack } from './harness.ts';
import { ANALYSIS, CSV } from './marketing-fixture.ts';
import { b64, mcpClient, structured, toolsOf } from './mcp-client.ts';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const images = (r: unknown) => (r as CallToolResult).content.filter((c): c is ImageContent => c.type === 'image');
const textJson = (r: unknown) => JSON.parse(((r as CallToolResult).content[0] as { text: string }).text) as unknown;

test('MCP reference workflow: upload a CSV, chart + PDF, read the PNG back, list, a broken run, close', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const { client } = await mcpClient(s);
  t.after(() => client.close());
  const { call, ok, fail } = toolsOf(client);

  await t.test('tools/list shows the contract tools with JSON Schemas from libs/contracts', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((x) => x.name).sort(), [
      'call_tool',
      'close_session',
      'create_session',
      'delete_snapshot',
      'fork_session',
      'list_artifacts',
      'list_services',
      'list_snapshots',
      'list_templates',
      'list_tools',
      'list_volumes',
      'pause_session',
      'read_artifact',
      'restore_snapshot',
      'resume_session',
      'revoke_previews',
      'run_code',
      'run_python',
      'run_tests',
      'service_logs',
      'session_metrics',
      'snapshot_session',
      'start_service',
      'stop_service',
      'undo_run',
      'upload_file',
    ]);
    for (const tool of tools) {
      assert.equal(tool.inputSchema.type, 'object', tool.name);
      assert.equal(tool.outputSchema?.type, 'object', tool.name);
      assert.ok(tool.description && tool.description.length > 20, tool.name);
    }
    const byName = Object.fromEntries(tools.map((x) => [x.name, x]));
    assert.deepEqual(byName.upload_file!.inputSchema.required, ['filename', 'content_base64']);
    assert.deepEqual(byName.run_python!.inputSchema.required, ['code']);
    assert.deepEqual(byName.read_artifact!.inputSchema.required, ['session_id', 'path']);
    const language = byName.run_code!.inputSchema.properties!.language as { anyOf: { const: string }[] };
    assert.deepEqual(
      language.anyOf.map((l) => l.const),
      ['python', 'javascript', 'typescript', 'bash'],
    );
  });

  let session = '';
  await t.test('upload_file without a session_id creates one and saves under /mnt/data', async () => {
    const r = await call('upload_file', { filename: 'marketing.csv', content_base64: b64(CSV) });
    assert.equal(r.isError, undefined);
    session = structured(r).session_id;
    assert.match(session, /^sess_[0-9a-f]{12}$/);
    assert.deepEqual(structured(r), { session_id: session, path: '/mnt/data/marketing.csv' });
    assert.deepEqual(textJson(r), structured(r), 'the same object as text for clients that read only text');
    const rest = await s.api('GET', `/v1/sessions/${session}`);
    assert.equal(rest.status, 200, 'a real session of the same tenant');
    assert.equal(rest.body.mode, 'process');
  });

  let chart = { download_url: '', size_bytes: 0 };
  await t.test('run_python makes the chart and the PDF; the chart also comes back as an image', async () => {
    const r = await call('run_python', { session_id: session, code: ANALYSIS });
    const out = structured(r);
    assert.equal(out.exit_code, 0, out.stderr);
    assert.equal(out.session_id, session);
    assert.match(out.run_id, /^exec_[0-9a-f]{16}$/);
    assert.match(out.stdout, /search/);
    assert.equal(out.stdout_truncated, false);
    assert.ok(out.duration_ms >= 0);
    const byPath = Object.fromEntries(out.artifacts.map((a: { path: string }) => [a.path, a]));
    assert.deepEqual(Object.keys(byPath).sort(), ['/mnt/data/cpa.png', '/mnt/data/report.pdf']);
    assert.deepEqual(Object.keys(byPath['/mnt/data/cpa.png']).sort(), [
      'download_url',
      'filename',
      'mime_type',
      'path',
      'size_bytes',
    ]);
    assert.equal(byPath['/mnt/data/cpa.png'].filename, 'cpa.png');
    assert.equal(byPath['/mnt/data/report.pdf'].mime_type, 'application/pdf');
    chart = byPath['/mnt/data/cpa.png'];
    const downloaded = Buffer.from(await (await fetch(chart.download_url)).arrayBuffer());
    assert.equal(downloaded.length, chart.size_bytes);
    const [image, ...more] = images(r);
    assert.equal(more.length, 0, 'the PDF is not an image');
    assert.equal(image!.mimeType, 'image/png');
    assert.equal(sha256(Buffer.from(image!.data, 'base64')), sha256(downloaded));
  });

  await t.test('read_artifact returns the PNG as base64 and as image content', async () => {
    const r = await call('read_artifact', { session_id: session, path: '/mnt/data/cpa.png' });
    const out = structured(r);
    assert.equal(out.path, '/mnt/data/cpa.png');
    assert.equal(out.filename, 'cpa.png');
    assert.equal(out.mime_type, 'image/png');
    assert.equal(out.size_bytes, chart.size_bytes);
    const bytes = Buffer.from(out.content_base64, 'base64');
    assert.deepEqual([...bytes.subarray(1, 4)], [...Buffer.from('PNG')]);
    assert.equal(sha256(bytes), sha256(Buffer.from(await (await fetch(chart.download_url)).arrayBuffer())));
    assert.equal(images(r)[0]!.data, out.content_base64);

    const pdf = await call('read_artifact', { session_id: session, path: 'report.pdf' });
    assert.equal(structured(pdf).path, '/mnt/data/report.pdf', 'a relative path is under /mnt/data');
    assert.equal(Buffer.from(structured(pdf).content_base64, 'base64').subarray(0, 5).toString(), '%PDF-');
    assert.equal(images(pdf).length, 0);
  });

  await t.test('list_artifacts lists every file in /mnt/data, the upload included', async () => {
    const out = await ok('list_artifacts', { session_id: session });
    assert.equal(out.session_id, session);
    assert.deepEqual(
      out.artifacts.map((a: { path: string }) => a.path),
      ['/mnt/data/cpa.png', '/mnt/data/marketing.csv', '/mnt/data/report.pdf'],
    );
    const csv = out.artifacts.find((a: { filename: string }) => a.filename === 'marketing.csv');
    assert.equal(csv.size_bytes, Buffer.byteLength(CSV));
    assert.equal(csv.mime_type, 'text/csv');
    assert.equal(await (await fetch(csv.download_url)).text(), CSV);
  });

  await t.test('a broken script is a result, not a tool error: exit code, traceback, no artifacts', async () => {
    const code = "import pandas as pd\npd.read_csv('marketing.csv')['revenue']\n";
    const r = await call('run_python', { session_id: session, code });
    assert.equal(r.isError, undefined);
    const out = structured(r);
    assert.equal(out.state, 'failed');
    assert.notEqual(out.exit_code, 0);
    assert.match(out.stderr, /Traceback[\s\S]*KeyError: 'revenue'/);
    assert.deepEqual(out.artifacts, []);
    assert.equal(images(r).length, 0);
  });

  await t.test('close_session deletes the session; it is then unknown', async () => {
    assert.deepEqual(await ok('close_session', { session_id: session }), { session_id: session, status: 'closed' });
    assert.equal((await s.api('GET', `/v1/sessions/${session}`)).status, 404);
    assert.equal((await fetch(chart.download_url)).status, 404, 'its files are gone');
    assert.deepEqual(await fail('close_session', { session_id: session }), {
      error: 'session_not_found',
      message: `No active session with id ${session}`,
      session_id: session,
    });
  });
});

test('MCP stateful session and other languages', async (t) => {
  const s = await startStack();
  t.after(() => s.close());
  const { client } = await mcpClient(s);
  t.after(() => client.close());
  const { ok, fail } = toolsOf(client);

  await t.test('create_session {mode: stateful}: x = 41, then x + 1 is "42"', async () => {
    const created = await ok('create_session', { mode: 'stateful' });
    const inSession = { session_id: created.session_id };
    assert.equal(created.mode, 'stateful');
    assert.match(created.session_id, /^sess_[0-9a-f]{12}$/);
    assert.ok(Date.parse(created.expires_at) > Date.now());
    const first = await ok('run_python', { ...inSession, code: 'x = 41' });
    assert.equal(first.exit_code, 0, first.stderr);
    const second = await ok('run_python', { ...inSession, code: 'x + 1' });
    assert.equal(second.value, '42');
    assert.equal(second.session_id, created.session_id);

    const js = await fail('run_code', { ...inSession, language: 'javascript', code: '1' });
    assert.equal(js.error, 'unsupported_language', 'a stateful session runs python only');
  });

  await t.test('run_code runs javascript and bash; without a session_id it opens a process session', async () => {
    const js = await ok('run_code', { language: 'javascript', code: 'console.log(6 * 7)' });
    assert.equal(js.stdout, '42\n');
    assert.equal((await s.api('GET', `/v1/sessions/${js.session_id}`)).body.mode, 'process');
    const code = 'echo hi > note.txt; cat note.txt';
    const sh = await ok('run_code', { session_id: js.session_id, language: 'bash', code });
    assert.equal(sh.stdout, 'hi\n');
    assert.deepEqual(
      sh.artifacts.map((a: { path: string }) => a.path),
      ['/mnt/data/note.txt'],
    );
  });

  await t.test(
    'run_tests: each test with its outcome, progress per test, and a syntax error as tests_not_run',
    async () => {
      const seen: string[] = [];
      const out = await ok(
        'run_tests',
        {
          language: 'python',
          code: 'def add(a, b):\n    return a + b\n',
          tests:
            'from main import add\n\ndef test_ok():\n    assert add(1, 2) == 3\n\ndef test_no():\n    assert add(1, 1) == 3\n',
        },
        { onprogress: (p) => void seen.push(p.message ?? '') },
      );
      assert.equal(out.state, 'failed');
      assert.deepEqual(out.tests.summary, { total: 2, passed: 1, failed: 1, skipped: 0 });
      assert.deepEqual(
        out.tests.results.map((c: { name: string; passed: boolean }) => [c.name, c.passed]),
        [
          ['test_ok', true],
          ['test_no', false],
        ],
      );
      assert.match(out.tests.results[1].error, /assert 2 == 3/);
      assert.ok(seen.includes('test: test_ok passed') && seen.includes('test: test_no failed'), seen.join(' | '));
      const broken = await ok('run_tests', {
        session_id: out.session_id,
        language: 'typescript',
        code: 'export const add = (a: number, b: number) => a +;\n',
        tests: "import test from 'node:test';\nimport { add } from './main';\ntest('a', () => {});\n",
      });
      assert.deepEqual([broken.state, broken.tests.summary.total], ['error', 0]);
      assert.match(broken.message, /did not run/);
      const bash = await fail('run_tests', { language: 'bash', code: 'true', tests: 'true' });
      assert.equal(bash.error, 'unsupported_language');
    },
  );
});
