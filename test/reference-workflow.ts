import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Sandgate, listFiles } from '@sandgate/client';
import { ANALYSIS, CSV } from './marketing-fixture.ts';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/**
 * The reference workflow through @sandgate/client against the sandgate at `baseUrl`: upload a marketing CSV, a
 * pandas + seaborn run makes a chart PNG and a reportlab PDF, both downloaded (into `dir`) and checked, a broken run
 * fails with a traceback, the fixed run succeeds in the same session. Returns the session's id.
 */
export async function referenceWorkflow(baseUrl: string, apiKey: string, dir: string): Promise<string> {
  const sandgate = new Sandgate({ baseUrl, apiKey });

  const session = (await sandgate.createSession()).id;
  const uploaded = await sandgate.upload(session, 'marketing.csv', new Blob([CSV], { type: 'text/csv' }));
  assert.equal(uploaded.path, 'marketing.csv');
  assert.equal(uploaded.size_bytes, Buffer.byteLength(CSV));

  const run = await sandgate.run({ session_id: session, language: 'python', code: ANALYSIS }, { timeoutSeconds: 120 });
  const result = run.result!;
  assert.equal(result.state, 'completed', result.stderr);
  assert.equal(result.exit_code, 0);
  assert.match(result.stdout, /search/);
  const byPath = Object.fromEntries(result.artifacts.map((a) => [a.path, a]));
  assert.deepEqual(Object.keys(byPath).sort(), ['cpa.png', 'report.pdf'], 'the input CSV is not an artifact');
  assert.equal(byPath['cpa.png']!.mime_type, 'image/png');
  assert.equal(byPath['report.pdf']!.mime_type, 'application/pdf');

  for (const a of Object.values(byPath)) {
    const dest = join(dir, a.filename);
    assert.equal(await sandgate.download(a.download_url, dest), a.size_bytes);
    assert.equal(sha256(await readFile(dest)), a.sha256);
    const res = await fetch(a.download_url);
    assert.equal(res.headers.get('content-type'), a.mime_type, "a download carries the file's own type");
    assert.match(res.headers.get('content-disposition') ?? '', new RegExp(a.path.replace('.', '\\.')));
    await res.arrayBuffer();
  }
  const png = await readFile(join(dir, 'cpa.png'));
  assert.deepEqual([...png.subarray(1, 4)], [...Buffer.from('PNG')]);
  assert.equal(
    await sandgate.download({ sessionId: session, path: 'report.pdf' }, join(dir, 'by-key.pdf')),
    byPath['report.pdf']!.size_bytes,
  );

  const broken = await sandgate.run({
    session_id: session,
    language: 'python',
    code: "import pandas as pd\ndf = pd.read_csv('marketing.csv')\nprint(df['revenue'].sum())\n",
  });
  assert.equal(broken.result!.state, 'failed');
  assert.notEqual(broken.result!.exit_code, 0);
  assert.match(broken.result!.stderr, /Traceback[\s\S]*KeyError: 'revenue'/);
  assert.deepEqual(broken.result!.artifacts, []);

  const fixed = await sandgate.run({
    session_id: session,
    language: 'python',
    code: "import pandas as pd\ndf = pd.read_csv('marketing.csv')\ndf['revenue'] = df.conversions * 40\ndf.to_csv('with_revenue.csv', index=False)\nprint(int(df['revenue'].sum()))\n",
  });
  assert.equal(fixed.result!.state, 'completed', fixed.result!.stderr);
  assert.equal(fixed.session_id, session);
  assert.equal(fixed.result!.artifacts.map((a) => a.path).join(), 'with_revenue.csv');
  assert.equal(fixed.result!.artifacts[0]!.mime_type, 'text/csv');

  // The generated SDK function, with the configured client, answers the same listing.
  const listing = await listFiles({ client: sandgate.client, path: { id: session } });
  assert.deepEqual(listing.data!.files.map((f) => f.path).sort(), [
    'cpa.png',
    'marketing.csv',
    'report.pdf',
    'with_revenue.csv',
  ]);
  return session;
}
