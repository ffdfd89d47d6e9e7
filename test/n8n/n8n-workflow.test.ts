import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startStack } from '../harness.ts';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../..');
const N8N = join(ROOT, '.cache/n8n-2.8.4/node_modules/.bin/n8n');
const KEY = 'n'.repeat(32);

interface NodeRun {
  executionStatus: string;
  error?: { message: string };
  data?: { main: { json: any; binary?: Record<string, { data: string; mimeType: string; fileName: string }> }[][] };
}

/** The workflow JSON of docs/n8n.md, exactly as a user copies it. */
async function docWorkflow(): Promise<any> {
  const md = await readFile(join(ROOT, 'docs/n8n.md'), 'utf8');
  const block = /## Workflow: upload a CSV, run code, download the chart[\s\S]*?```json\n([\s\S]*?)\n```/.exec(md);
  assert.ok(block, 'docs/n8n.md has the workflow');
  return JSON.parse(block[1]!);
}

test("docs/n8n.md's workflow, imported into n8n and run, uploads a CSV, runs pandas and downloads the chart", async (t) => {
  await access(N8N).catch(() => assert.fail(`${N8N} is missing: run \`bash scripts/setup.sh --for-tests\` (it installs n8n)`));
  const s = await startStack({ env: { SANDGATE_API_KEYS: `${KEY}:n8n` } });
  t.after(() => s.close());
  const home = await mkdtemp(join(tmpdir(), 'sandgate-n8n-'));
  t.after(() => rm(home, { recursive: true, force: true }));

  const wf = await docWorkflow();
  const config = wf.nodes.find((n: any) => n.name === 'Config').parameters.assignments.assignments;
  config.find((a: any) => a.name === 'base_url').value = s.url;
  config.find((a: any) => a.name === 'api_key').value = KEY;
  const id = 'sgDocCsvChart001';
  await writeFile(join(home, 'workflow.json'), JSON.stringify([{ ...wf, id, active: false }]));
  const env = {
    ...process.env, N8N_USER_FOLDER: home, N8N_DIAGNOSTICS_ENABLED: 'false', N8N_DEFAULT_BINARY_DATA_MODE: 'default',
    N8N_VERSION_NOTIFICATIONS_ENABLED: 'false', N8N_PERSONALIZATION_ENABLED: 'false',
  };
  await run(N8N, ['import:workflow', `--input=${join(home, 'workflow.json')}`], { env, timeout: 180_000 });
  const out = await run(N8N, ['execute', `--id=${id}`, '--rawOutput'], { env, timeout: 180_000, maxBuffer: 64 << 20 })
    .then((r) => r.stdout, (err: { stdout?: string; stderr?: string }) => assert.fail(`n8n execute failed: ${err.stderr}\n${err.stdout}`));
  const json = out.slice(out.indexOf('{\n  "data"'));
  const execution = JSON.parse(json.slice(0, json.lastIndexOf('}') + 1));
  assert.equal(execution.status, 'success');
  const runData = execution.data.resultData.runData as Record<string, NodeRun[]>;
  for (const [name, runs] of Object.entries(runData)) {
    assert.equal(runs[0]!.executionStatus, 'success', `${name}: ${runs[0]!.error?.message}`);
  }
  const out1 = (node: string) => runData[node]![0]!.data!.main[0]![0]!;

  const session = out1('Create session').json.id as string;
  assert.deepEqual(out1('Upload CSV').json.files.map((f: any) => [f.path, f.mime_type]), [['sales.csv', 'text/csv']]);
  const executed = out1('Run code').json;
  assert.equal(executed.state, 'completed');
  assert.equal(executed.result.stdout, '575\n', 'pandas read the CSV n8n uploaded');
  const chart = executed.result.artifacts.find((a: any) => a.filename === 'chart.png');
  const png = out1('Download chart').binary!.data!;
  assert.equal(png.mimeType, 'image/png');
  assert.equal(png.fileName, 'chart.png');
  assert.equal(createHash('sha256').update(Buffer.from(png.data, 'base64')).digest('hex'), chart.sha256);

  // On sandgate's side: the session holds exactly what n8n sent and what the run made.
  const files = await s.api('GET', `/v1/sessions/${session}/files`, undefined, { authorization: `Bearer ${KEY}` });
  assert.deepEqual(files.body.files.map((f: any) => f.path).sort(), ['chart.png', 'sales.csv']);
  const csv = await fetch(files.body.files.find((f: any) => f.path === 'sales.csv').download_url);
  assert.equal(await csv.text(), wf.nodes.find((n: any) => n.name === 'Config').parameters.assignments.assignments
    .find((a: any) => a.name === 'csv').value);
});
