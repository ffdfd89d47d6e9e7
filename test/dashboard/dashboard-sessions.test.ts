import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KEY_A, openPage, signIn, startDashboardStack, until } from './browser.ts';

const SESSIONS = 55;

test('sessions: every one reachable page by page; restart, delete, and a file deleted', async (t) => {
  const d = await startDashboardStack({ env: { SANDGATE_MAX_SESSIONS: '80' } });
  t.after(() => d.close());
  const ids: string[] = [];
  for (let i = 0; i < SESSIONS; i++) ids.push((await d.stack.api('POST', '/v1/sessions', {})).body.id);
  const firstPage = (await d.stack.api('GET', '/v1/sessions?limit=50')).body as {
    sessions: unknown[];
    next_cursor?: string;
  };

  const { page, problems } = await openPage(d);
  page.on('dialog', (dialog) => void dialog.accept());
  await signIn(page, d.base, KEY_A);
  const rows = page.locator('tr[data-session]');
  await rows.first().waitFor();
  // Where the API pages (next_cursor), the list shows a page and "Load more"; either way all are reachable.
  await until('the first page', async () => (await rows.count()) === firstPage.sessions.length);
  for (let i = 0; i < 5 && (await page.getByRole('button', { name: 'Load more' }).count()) > 0; i++) {
    await page.getByRole('button', { name: 'Load more' }).click();
    await until('the next page', async () => (await rows.count()) > firstPage.sessions.length);
  }
  const shown = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-session')));
  assert.deepEqual([...shown].sort(), [...ids].sort(), 'each session once');
  assert.equal(shown[0], ids.at(-1), 'newest first');

  const [doomed, restarted] = [ids[0]!, ids[1]!];
  await page.getByRole('button', { name: `Restart ${restarted}` }).click();
  await page.getByRole('button', { name: `Delete ${doomed}` }).click();
  await page.locator(`tr[data-session="${doomed}"]`).waitFor({ state: 'detached' });
  assert.equal((await d.stack.api('GET', `/v1/sessions/${doomed}`)).status, 404);
  assert.equal((await d.stack.api('GET', `/v1/sessions/${restarted}`)).status, 200);
  assert.equal(await page.getByRole('alert').count(), 0);

  const put = await d.stack.api('PUT', `/v1/sessions/${restarted}/files/notes/a b.txt`, 'hello', {
    'content-type': 'text/plain',
  });
  assert.equal(put.status, 201);
  await page.goto(`${d.base}#/sessions/${restarted}`);
  const file = page.locator('tr[data-file="notes/a b.txt"]');
  await file.getByRole('button', { name: 'notes/a b.txt', exact: true }).click();
  await page.getByLabel('contents of a b.txt').filter({ hasText: 'hello' }).waitFor();
  await file.getByRole('button', { name: 'Delete notes/a b.txt' }).click();
  await file.waitFor({ state: 'detached' });
  assert.deepEqual((await d.stack.api('GET', `/v1/sessions/${restarted}/files`)).body.files, []);

  // An id from the address bar is one path segment: it cannot reach another endpoint.
  await page.goto(`${d.base}#/sessions/..%2F..%2Fv1%2Fruntimes`);
  await page.getByRole('alert').waitFor();
  assert.deepEqual(problems, []);
});
