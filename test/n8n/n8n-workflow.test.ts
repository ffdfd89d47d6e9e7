import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startStack, until } from '../harness.ts';
import { n8nInstalled } from './n8n-install.ts';
import { freePort } from '../redis-and-ports.ts';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../..');
const KEY = 'n'.repeat(32);

interface NodeRun {
  executionStatus: string;
  error?: { message: string };
  data?: { main: { json: any; binary?: Record<string, { data: string; mimeType: string; fileName: string }> }[][] };
}

/** A workflow JSON of docs/n8n.md (the first after `heading`), exactly as a user copies it. */
async function docWorkflow(heading = '## Workflow: upload a CSV, run code, download the chart'): Promise<any> {
  const md = await readFile(join(ROOT, 'docs/n8n.md'), 'utf8');
  const block = new RegExp(`${heading}[\\s\\S]*?\`\`\`json\\n([\\s\\S]*?)\\n\`\`\``).exec(md);
  assert.ok(block, `docs/n8n.md has the workflow under "${heading}"`);
  return JSON.parse(block[1]!);
}

/** Sets the named fields of a Set node. */
function configure(wf: any, node: string, values: Record<string, string>): void {
  const fields = wf.nodes.find((n: any) => n.name === node).parameters.assignments.assignments;
  for (const [name, value] of Object.entries(values)) fields.find((a: any) => a.name === name).value = value;
}

test("docs/n8n.md's workflow, imported into n8n and run, uploads a CSV, runs pandas and downloads the chart", async (t) => {
  const N8N = await n8nInstalled();
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
    ...process.env,
    N8N_USER_FOLDER: home,
    N8N_DIAGNOSTICS_ENABLED: 'false',
    N8N_DEFAULT_BINARY_DATA_MODE: 'default',
    N8N_VERSION_NOTIFICATIONS_ENABLED: 'false',
    N8N_PERSONALIZATION_ENABLED: 'false',
  };
  await run(N8N, ['import:workflow', `--input=${join(home, 'workflow.json')}`], { env, timeout: 180_000 });
  const out = await run(N8N, ['execute', `--id=${id}`, '--rawOutput'], {
    env,
    timeout: 180_000,
    maxBuffer: 64 << 20,
  }).then(
    (r) => r.stdout,
    (err: { stdout?: string; stderr?: string }) => assert.fail(`n8n execute failed: ${err.stderr}\n${err.stdout}`),
  );
  const json = out.slice(out.indexOf('{\n  "data"'));
  const execution = JSON.parse(json.slice(0, json.lastIndexOf('}') + 1));
  assert.equal(execution.status, 'success');
  const runData = execution.data.resultData.runData as Record<string, NodeRun[]>;
  for (const [name, runs] of Object.entries(runData)) {
    assert.equal(runs[0]!.executionStatus, 'success', `${name}: ${runs[0]!.error?.message}`);
  }
  const out1 = (node: string) => runData[node]![0]!.data!.main[0]![0]!;

  const session = out1('Create session').json.id as string;
  assert.deepEqual(
    out1('Upload CSV').json.files.map((f: any) => [f.path, f.mime_type]),
    [['sales.csv', 'text/csv']],
  );
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
  assert.equal(
    await csv.text(),
    wf.nodes.find((n: any) => n.name === 'Config').parameters.assignments.assignments.find((a: any) => a.name === 'csv')
      .value,
  );
});

test("docs/n8n.md's callback workflow, published in n8n, submits a run and goes on when sandgate calls its Wait node back", async (t) => {
  const N8N = await n8nInstalled();
  const s = await startStack({ env: { SANDGATE_API_KEYS: `${KEY}:n8n`, SANDGATE_WEBHOOK_ALLOW: '127.0.0.1' } });
  t.after(() => s.close());
  const home = await mkdtemp(join(tmpdir(), 'sandgate-n8n-'));
  t.after(() => rm(home, { recursive: true, force: true }));

  // What the workflow's last node produced is posted to this receiver: the test's window into the workflow.
  let report: (body: any) => void = () => {};
  const reported = new Promise<any>((resolve) => {
    report = resolve;
  });
  const receiver = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c;
    });
    req.on('end', () => {
      res.end('ok');
      report(JSON.parse(body));
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => receiver.close(() => resolve())));

  const wf = await docWorkflow('## Long runs: submit, then wait for sandgate to call back');
  configure(wf, 'Config', { base_url: s.url, api_key: KEY });
  wf.nodes.push({
    parameters: {
      method: 'POST',
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/report`,
      sendBody: true,
      specifyBody: 'json',
      jsonBody: '={{ JSON.stringify($json) }}',
      options: {},
    },
    id: '7a000000-0000-4000-8000-0000000000ff',
    name: 'Report',
    type: 'n8n-nodes-base.httpRequest',
    typeVersion: 4.2,
    position: [1000, 0],
  });
  wf.connections.Result = { main: [[{ node: 'Report', type: 'main', index: 0 }]] };
  const id = 'sgDocCallback001';
  await writeFile(join(home, 'workflow.json'), JSON.stringify([{ ...wf, id, active: false }]));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = {
    ...process.env,
    N8N_USER_FOLDER: home,
    N8N_DIAGNOSTICS_ENABLED: 'false',
    N8N_VERSION_NOTIFICATIONS_ENABLED: 'false',
    N8N_PERSONALIZATION_ENABLED: 'false',
    N8N_PORT: String(port),
    N8N_LISTEN_ADDRESS: '127.0.0.1',
    WEBHOOK_URL: `${base}/`,
  };
  await run(N8N, ['import:workflow', `--input=${join(home, 'workflow.json')}`], { env, timeout: 180_000 });
  await run(N8N, ['publish:workflow', `--id=${id}`], { env, timeout: 180_000 });
  // n8n binds the port freePort found; another process may take it in between (n8n then exits, and whatever holds
  // the port answers): n8n is started again on another port.
  let answer: string | null = null;
  for (let attempt = 1; answer === null; attempt++) {
    assert.ok(attempt <= 3, 'n8n did not start on any of three free ports');
    const at =
      attempt === 1 ? { port, base } : await freePort().then((p) => ({ port: p, base: `http://127.0.0.1:${p}` }));
    const n8n = spawn(N8N, ['start'], {
      env: { ...env, N8N_PORT: String(at.port), WEBHOOK_URL: `${at.base}/` },
      stdio: 'ignore',
      detached: true,
    });
    let exited = false;
    n8n.on('exit', () => (exited = true));
    t.after(() => {
      try {
        process.kill(-n8n.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    });
    // The production webhook answers once n8n has activated the published workflow.
    const seen = await until(
      'n8n to take the webhook',
      async (): Promise<{ body: string | undefined } | null> => {
        if (exited) return { body: undefined }; // n8n could not bind the port
        const r = await fetch(`${at.base}/webhook/sandgate-run`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
        }).catch(() => null);
        if (r?.status !== 200) {
          await r?.body?.cancel();
          return null;
        }
        return { body: await r.text() };
      },
      120_000,
      500,
    );
    answer = seen.body ?? null;
  }
  assert.deepEqual(JSON.parse(answer), { message: 'Workflow was started' });

  const result = (await Promise.race([
    reported,
    new Promise((_, reject) => setTimeout(() => reject(new Error('the workflow never reported')), 120_000).unref()),
  ])) as { execution_id: string; state: string; stdout: string };
  assert.equal(result.state, 'completed');
  assert.equal(result.stdout, 'done after a while\n');
  // n8n may go on with the workflow before sandgate has recorded its answer to the callback.
  await until(
    'the callback to be recorded as delivered',
    async () => {
      const rec = await s.api('GET', `/v1/executions/${result.execution_id}`, undefined, {
        authorization: `Bearer ${KEY}`,
      });
      return rec.body.webhook?.state === 'delivered';
    },
    30_000,
  );
});
