import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { startStack } from './harness.ts';
import { ANALYSIS, CSV } from './marketing-fixture.ts';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

test('reference workflow: upload a CSV, chart + PDF report, download, a broken run, the fix', async (t) => {
  const s = await startStack();
  t.after(() => s.close());

  const session = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const form = new FormData();
  form.append('file', new Blob([CSV], { type: 'text/csv' }), 'marketing.csv');
  const up = await fetch(`${s.url}/v1/sessions/${session}/files`, { method: 'POST', body: form });
  assert.equal(up.status, 201);
  const uploaded = (await up.json()) as { files: { path: string; size_bytes: number }[] };
  assert.equal(uploaded.files[0]!.path, 'marketing.csv');
  assert.equal(uploaded.files[0]!.size_bytes, Buffer.byteLength(CSV));

  const run = await s.api('POST', '/v1/executions?wait=120', { session_id: session, language: 'python', code: ANALYSIS });
  assert.equal(run.status, 200, JSON.stringify(run.body));
  const result = run.body.result;
  assert.equal(result.state, 'completed', result.stderr);
  assert.equal(result.exit_code, 0);
  assert.match(result.stdout, /search/);
  const byPath = Object.fromEntries(result.artifacts.map((a: { path: string }) => [a.path, a]));
  assert.deepEqual(Object.keys(byPath).sort(), ['cpa.png', 'report.pdf'], 'the input CSV is not an artifact');
  assert.equal(byPath['cpa.png'].mime_type, 'image/png');
  assert.equal(byPath['report.pdf'].mime_type, 'application/pdf');

  for (const a of Object.values(byPath) as { path: string; sha256: string; size_bytes: number; download_url: string; mime_type: string }[]) {
    const res = await fetch(a.download_url);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), a.mime_type);
    assert.equal(Number(res.headers.get('content-length')), a.size_bytes);
    assert.match(res.headers.get('content-disposition') ?? '', new RegExp(a.path.replace('.', '\\.')));
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.equal(sha256(bytes), a.sha256);
  }
  const png = Buffer.from(await (await fetch(byPath['cpa.png'].download_url)).arrayBuffer());
  assert.deepEqual([...png.subarray(1, 4)], [...Buffer.from('PNG')]);

  const broken = await s.api('POST', '/v1/executions?wait=60', {
    session_id: session, language: 'python', code: "import pandas as pd\ndf = pd.read_csv('marketing.csv')\nprint(df['revenue'].sum())\n",
  });
  assert.equal(broken.body.result.state, 'failed');
  assert.notEqual(broken.body.result.exit_code, 0);
  assert.match(broken.body.result.stderr, /Traceback[\s\S]*KeyError: 'revenue'/);
  assert.deepEqual(broken.body.result.artifacts, []);

  const fixed = await s.api('POST', '/v1/executions?wait=60', {
    session_id: session, language: 'python',
    code: "import pandas as pd\ndf = pd.read_csv('marketing.csv')\ndf['revenue'] = df.conversions * 40\ndf.to_csv('with_revenue.csv', index=False)\nprint(int(df['revenue'].sum()))\n",
  });
  assert.equal(fixed.body.result.state, 'completed', fixed.body.result.stderr);
  assert.equal(fixed.body.session_id, session);
  assert.equal(fixed.body.result.artifacts.map((a: { path: string }) => a.path).join(), 'with_revenue.csv');
  assert.equal(fixed.body.result.artifacts[0].mime_type, 'text/csv');

  const listing = await s.api('GET', `/v1/sessions/${session}/files`);
  assert.deepEqual(listing.body.files.map((f: { path: string }) => f.path).sort(), ['cpa.png', 'marketing.csv', 'report.pdf', 'with_revenue.csv']);
});
