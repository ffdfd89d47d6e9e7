import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ServiceAgents } from '@sandgate/backends/services';
import { KEY_A, openPage, signIn, startDashboardStack, until } from './browser.ts';

test("a session's files panel follows its file events live", async (t) => {
  const d = await startDashboardStack();
  t.after(() => d.close());
  const id = (await d.stack.api('POST', '/v1/sessions', {})).body.id as string;
  const run = async (code: string) => {
    const r = await d.stack.api('POST', '/v1/executions?wait=60', { session_id: id, language: 'python', code });
    assert.equal(r.body.state, 'completed', JSON.stringify(r.body));
    assert.equal(r.body.result.exit_code, 0, JSON.stringify(r.body.result));
  };
  await run('pass');

  const { page, problems } = await openPage(d);
  // Reads of the list: a change applied from an event needs none.
  let listReads = 0;
  page.on('request', (req) => {
    if (req.method() === 'GET' && new RegExp(`/v1/sessions/${id}/files(\\?|$)`).test(req.url())) listReads++;
  });
  await signIn(page, d.base, KEY_A);
  await page.goto(`${d.base}#/sessions/${id}`);
  await page.locator('[data-live="open"]').waitFor();
  const agents = new ServiceAgents(d.stack.config.dataDir);
  await until('the sandbox watches the session directory', async () => (await agents.watchesOpen(id)) === 1, 30_000);

  // A file a run writes appears (a new file: the list is read again, for its link and type).
  await run("import os\nos.makedirs('live', exist_ok=True)\nopen('live/a.txt', 'w').write('a')");
  const row = page.locator('tr[data-file="live/a.txt"]');
  await row.waitFor();
  assert.equal(await row.locator('td.num').textContent(), '1 B');

  // Appended to: its size changes in place, from the event alone.
  const reads = listReads;
  await run("open('live/a.txt', 'a').write('b' * 99)");
  await until('the new size', async () => (await row.locator('td.num').textContent()) === '100 B');
  // Deleted: the row goes, again without reading the list.
  await run("import os\nos.remove('live/a.txt')");
  await row.waitFor({ state: 'detached' });
  assert.equal(listReads, reads, 'changes to files shown are applied from the events');

  // An upload through the API shows too.
  const put = await d.stack.api('PUT', `/v1/sessions/${id}/files/uploaded.txt`, 'hello', {
    'content-type': 'text/plain',
  });
  assert.equal(put.status, 201);
  await page.locator('tr[data-file="uploaded.txt"]').waitFor();
  assert.deepEqual(problems, []);
});
