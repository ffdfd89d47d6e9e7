import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { GENERATED_DIR, generateClient } from '../scripts/generate.ts';

async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) out[relative(dir, join(e.parentPath, e.name))] = await readFile(join(e.parentPath, e.name), 'utf8');
  }
  return out;
}

test('the committed generated client is what hey-api makes of openapi/openapi.json (run `npm run client`)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-client-gen-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await generateClient(dir);
  const [fresh, committed] = await Promise.all([tree(dir), tree(GENERATED_DIR)]);
  assert.deepEqual(Object.keys(committed).sort(), Object.keys(fresh).sort());
  for (const [file, text] of Object.entries(fresh)) assert.equal(committed[file], text, file);
});

test('the SDK has a function per operation, named by its operationId', async () => {
  const sdk = await import('./generated/sdk.gen.ts');
  assert.deepEqual(Object.keys(sdk).sort(), [
    'callTool',
    'cancelExecution',
    'createSession',
    'createSnapshot',
    'createTemplate',
    'createTerminalUrl',
    'createVolume',
    'deleteFile',
    'deleteScript',
    'deleteService',
    'deleteSession',
    'deleteSnapshot',
    'deleteTemplate',
    'deleteVolume',
    'deleteVolumeFile',
    'downloadFile',
    'downloadVolumeFile',
    'forkSession',
    'getExecution',
    'getExecutionOutput',
    'getHealth',
    'getMetrics',
    'getReadiness',
    'getScript',
    'getService',
    'getServiceLogs',
    'getSession',
    'getSessionMetrics',
    'getSystemStats',
    'getSystemStatsHistory',
    'getTemplate',
    'getVolume',
    'getWebhookSecret',
    'listExecutions',
    'listFiles',
    'listRuntimes',
    'listScripts',
    'listServices',
    'listSessions',
    'listSnapshots',
    'listTemplates',
    'listTools',
    'listVolumeFiles',
    'listVolumes',
    'makeSessionPrivate',
    'openTerminal',
    'pauseSession',
    'previewService',
    'proxyService',
    'putFile',
    'putVolumeFile',
    'restartSession',
    'restoreSnapshot',
    'resumeSession',
    'revokeServicePreviews',
    'runExecution',
    'saveScript',
    'shareService',
    'startService',
    'stopService',
    'streamExecutionEvents',
    'streamFileEvents',
    'streamSessionMetrics',
    'streamTemplateBuildEvents',
    'undoRun',
    'uploadFile',
    'uploadVolumeFile',
  ]);
});

test('the README lists every function of the SDK, and no other', async () => {
  const sdk = await import('./generated/sdk.gen.ts');
  const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('Functions of the generated SDK'), readme.indexOf('## Development'));
  const rows = section.split('\n').filter((line) => line.startsWith('| '));
  // Bare names in backticks: a method of Sandgate named there, such as `events()`, is not taken.
  const listed = rows.flatMap((row) => [...row.matchAll(/`([a-z][A-Za-z]+)`/g)].map((m) => m[1]));
  assert.deepEqual([...new Set(listed)].sort(), Object.keys(sdk).sort());
});

test("the package is ready to publish: its name, exports, and no dependency on sandgate's server packages", async () => {
  const pkg = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as {
    name: string;
    private?: boolean;
    exports: Record<string, unknown>;
    files: string[];
    dependencies: Record<string, string>;
    devDependencies?: Record<string, string>;
  };
  assert.equal(pkg.name, '@sandgate/client');
  assert.notEqual(pkg.private, true);
  assert.ok(pkg.exports['.'], 'a main export');
  // ws: Node 20 has no WebSocket of its own (terminal()); its types, since terminal() answers one.
  assert.deepEqual(Object.keys(pkg.dependencies), ['@types/ws', 'eventsource-parser', 'ws']);
  assert.ok(
    Object.values(pkg.dependencies).every((v) => /^\d+\.\d+\.\d+$/.test(v)),
    'exact versions',
  );
  const sources = await tree(new URL('.', import.meta.url).pathname);
  for (const [file, text] of Object.entries(sources)) {
    if (file.endsWith('.test.ts')) continue;
    assert.doesNotMatch(text, /from '@sandgate\/(?!client)/, `${file} imports no server package`);
  }
});

test('it compiles to plain JavaScript that Node loads without a TypeScript loader (npm run build)', async (t) => {
  const { execFile } = await import('node:child_process');
  const { promisify } = await import('node:util');
  const { createRequire } = await import('node:module');
  const pkgDir = new URL('..', import.meta.url).pathname;
  // Inside the package, so that the build resolves eventsource-parser as an installed package would.
  const out = await mkdtemp(join(pkgDir, '.build-test-'));
  t.after(() => rm(out, { recursive: true, force: true }));
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  await promisify(execFile)(process.execPath, [tsc, '-p', join(pkgDir, 'tsconfig.build.json'), '--outDir', out]);
  const { stdout } = await promisify(execFile)(process.execPath, [
    '--input-type=module',
    '-e',
    `const m = await import(${JSON.stringify(join(out, 'index.js'))}); console.log(typeof m.Sandgate, typeof m.runExecution)`,
  ]);
  assert.equal(stdout.trim(), 'function function');
});
