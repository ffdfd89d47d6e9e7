import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KEY_A, accessibilityProblems, openPage, screenshot, signIn, startDashboardStack, until } from './browser.ts';

test('volumes: made, filled by upload, mounted from the session form, refused deletion while mounted, deleted', async (t) => {
  const d = await startDashboardStack();
  t.after(() => d.close());
  const { page, problems } = await openPage(d);
  page.on('dialog', (dialog) => void dialog.accept());
  await signIn(page, d.base, KEY_A);

  await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Volumes' }).click();
  await page.getByText('No volumes yet.').waitFor();
  await page.getByLabel('Name').fill('datasets');
  await page.getByLabel('Size (MiB)').fill('8');
  await page.getByRole('button', { name: 'Create volume' }).click();
  await until('the volume page', async () => page.url().endsWith('#/volumes/datasets'));
  const made = (await d.stack.api('GET', '/v1/volumes/datasets')).body;
  assert.equal(made.size_bytes, 8 * 1024 * 1024);

  // Upload into the volume as into a session: a drop carrying the file.
  const transfer = await page.evaluateHandle(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['region,amount\nnorth,10\n'], 'sales.csv', { type: 'text/csv' }));
    return dt;
  });
  await page.dispatchEvent('[data-testid="dropzone"]', 'drop', { dataTransfer: transfer });
  await page.locator('[data-upload="sales.csv"][data-done="true"]').waitFor();
  const row = page.locator('tr[data-file="sales.csv"]');
  await row.waitFor();
  const link = await row.getByRole('link', { name: /Download/ }).getAttribute('href');
  assert.ok(link?.startsWith(`/files/volumes/${made.id}/sales.csv?`), String(link));
  assert.deepEqual(
    (await d.stack.api('GET', '/v1/volumes/datasets/files')).body.files.map((f: { path: string }) => f.path),
    ['sales.csv'],
  );
  await row.getByRole('button', { name: 'sales.csv', exact: true }).click();
  await page
    .getByRole('region', { name: /^sales.csv/ })
    .filter({ hasText: 'north' })
    .waitFor();
  await screenshot(page, 'volume');
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');

  // The session form offers the tenant's volumes.
  await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Sessions' }).click();
  await page.getByLabel('datasets').selectOption('ro');
  await page.getByRole('button', { name: 'Create session' }).click();
  const sessionId = await until(
    'the session page',
    async () => /#\/sessions\/(sess_[0-9a-f]{12})$/.exec(page.url())?.[1],
  );
  const mounted = page.getByRole('list', { name: 'mounted volumes' });
  await mounted.filter({ hasText: '/mnt/volumes/datasets (read-only)' }).waitFor();
  assert.deepEqual((await d.stack.api('GET', `/v1/sessions/${sessionId}`)).body.volumes, [
    { name: 'datasets', path: '/mnt/volumes/datasets', read_only: true },
  ]);

  // The list says who mounts it; deleting it meanwhile is refused with the reason.
  await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Volumes' }).click();
  const listed = page.locator('tr[data-volume="datasets"]');
  await listed.getByText(`${sessionId} reads`).waitFor();
  await listed.getByRole('button', { name: 'Delete volume datasets' }).click();
  await page.getByRole('alert').filter({ hasText: 'volume_in_use' }).waitFor();
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');

  assert.equal((await d.stack.api('DELETE', `/v1/sessions/${sessionId}`)).status, 204);
  await listed.getByRole('button', { name: 'Delete volume datasets' }).click();
  await listed.waitFor({ state: 'detached' });
  assert.equal((await d.stack.api('GET', '/v1/volumes/datasets')).status, 404);
  assert.deepEqual(problems, []);
});
