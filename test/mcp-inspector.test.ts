import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startStack } from './harness.ts';

const run = promisify(execFile);
const INSPECTOR = new URL('../node_modules/.bin/mcp-inspector', import.meta.url).pathname;
const KEY = 'inspector-key-0123456789';

test('the MCP Inspector CLI lists the tools and calls run_python against a running stack', async (t) => {
  const s = await startStack({ apiKey: KEY, env: { SANDGATE_API_KEYS: `${KEY}:inspector` } });
  t.after(() => s.close());
  // The inspector keeps a catalog and storage under $HOME: give it a home of its own.
  const home = await mkdtemp(join(tmpdir(), 'sandgate-inspector-'));
  t.after(() => rm(home, { recursive: true, force: true }));
  const inspect = async (...args: string[]) => {
    const target = ['--cli', `${s.url}/mcp`, '--transport', 'http', '--header', `Authorization: Bearer ${KEY}`];
    const env = { ...process.env, HOME: home };
    const { stdout } = await run(INSPECTOR, [...target, ...args], { env, timeout: 120_000 });
    return JSON.parse(stdout) as Record<string, any>;
  };

  // --strict exits non-zero (and so fails this test) on any tool-schema portability error.
  const listed = await inspect('--method', 'tools/list', '--strict');
  assert.deepEqual(listed.tools.map((x: { name: string }) => x.name).sort(), [
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

  const called = await inspect('--method', 'tools/call', '--tool-name', 'run_python', '--tool-arg', 'code=print(6*7)');
  assert.equal(called.structuredContent.stdout, '42\n');
  assert.equal(called.structuredContent.exit_code, 0);
  assert.match(called.structuredContent.session_id, /^sess_[0-9a-f]{12}$/);
});
