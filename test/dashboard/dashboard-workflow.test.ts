import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import {
  KEY_A,
  accessibilityProblems,
  openPage,
  screenshot,
  signIn,
  startDashboardStack,
  typeCode,
  until,
} from './browser.ts';
import { ANALYSIS, CSV } from './fixtures.ts';

test('an analyst signs in, drops a CSV, runs pandas + seaborn, watches it stream, downloads the chart', async (t) => {
  const d = await startDashboardStack();
  t.after(() => d.close());
  const { page, problems, requests } = await openPage(d);
  page.on('dialog', (dialog) => void dialog.accept());

  await page.goto(d.base);
  await page.getByLabel('API key').fill('not-a-key-of-this-deployment');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').filter({ hasText: 'This API key is not valid.' }).waitFor();
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');
  await screenshot(page, 'sign-in');
  await signIn(page, d.base, KEY_A);

  await page.getByLabel('Mode').selectOption('process');
  await page.getByRole('button', { name: 'Create session' }).click();
  const sessionId = await until(
    'the session page',
    async () => /#\/sessions\/(sess_[0-9a-f]{12})$/.exec(page.url())?.[1],
  );

  // Drag and drop, as a person does: a drop event carrying the file.
  const transfer = await page.evaluateHandle((csv) => {
    const dt = new DataTransfer();
    dt.items.add(new File([csv], 'marketing.csv', { type: 'text/csv' }));
    return dt;
  }, CSV);
  await page.dispatchEvent('[data-testid="dropzone"]', 'drop', { dataTransfer: transfer });
  await page.locator('[data-upload="marketing.csv"][data-done="true"]').waitFor();
  assert.equal(
    await page.locator('[data-upload="marketing.csv"] progress').evaluate((p) => (p as HTMLProgressElement).value),
    1,
  );
  const row = page.locator('tr[data-file="marketing.csv"]');
  await row.waitFor();
  assert.match(await row.innerText(), new RegExp(`${(Buffer.byteLength(CSV) / 1024).toFixed(1)} KiB\\s+text/csv`));
  await row.getByRole('button', { name: 'marketing.csv', exact: true }).click();
  const table = page.getByRole('region', { name: /marketing\.csv/ });
  await table.locator('thead th').first().waitFor();
  assert.deepEqual(await table.locator('thead th').allInnerTexts(), [
    'date',
    'channel',
    'spend',
    'clicks',
    'conversions',
  ]);
  assert.equal(await table.locator('tbody tr').count(), 60);

  await typeCode(page, page.getByRole('form', { name: 'run code' }), ANALYSIS);
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  const run = page.locator('.live-run');
  await run.locator('.console').getByText('rows loaded: 60').waitFor();
  assert.equal(await run.getAttribute('data-state'), 'running', 'the first line shows while the run is still going');
  await page.locator('.live-run[data-state="completed"]').waitFor({ timeout: 120_000 });
  const executionId = (await run.getAttribute('data-execution'))!;
  assert.equal(await run.locator('.console .ansi-green-fg').innerText(), 'done', 'ANSI colours are rendered');
  assert.deepEqual(
    await run.locator('.timeline li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-phase'))),
    ['queued', 'starting', 'running', 'harvesting', 'done'],
  );

  const chart = run.locator('li.artifact[data-path="cpa.png"] img');
  await until('the chart to load', () => chart.evaluate((img) => (img as HTMLImageElement).naturalWidth > 0));
  await run.locator('li.artifact[data-path="report.pdf"] canvas[data-rendered="true"]').waitFor();
  await screenshot(page, 'session-run');

  const [download] = await Promise.all([
    page.waitForEvent('download'),
    run
      .locator('li.artifact[data-path="cpa.png"]')
      .getByRole('link', { name: /Download/ })
      .click(),
  ]);
  const downloaded = await readFile((await download.path())!);
  const artifact = (await d.stack.api('GET', `/v1/executions/${executionId}`)).body.result.artifacts.find(
    (a: { path: string }) => a.path === 'cpa.png',
  );
  assert.equal(createHash('sha256').update(downloaded).digest('hex'), artifact.sha256);
  assert.equal(download.suggestedFilename(), 'cpa.png');
  assert.equal(await run.locator('li.artifact[data-path="cpa.png"] .sha').innerText(), artifact.sha256.slice(0, 12));
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');

  await page.getByRole('link', { name: 'Runs', exact: true }).click();
  await page.locator(`tr[data-execution="${executionId}"][data-state="completed"]`).waitFor();
  assert.match(
    await page.locator(`tr[data-execution="${executionId}"]`).innerText(),
    new RegExp(`python[\\s\\S]*${sessionId}`),
  );
  await page.getByLabel('filter by state').selectOption('failed');
  await page.getByText('No failed runs.').waitFor();
  await page.getByLabel('filter by state').selectOption('completed');
  await page.locator(`tr[data-execution="${executionId}"]`).waitFor();
  await screenshot(page, 'runs');
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');

  await page.goto(`${d.base}#/runs/${executionId}`);
  await page.locator('.live-run[data-state="completed"] li.artifact[data-path="cpa.png"] img').waitFor();
  await screenshot(page, 'run');

  await page.getByRole('link', { name: 'Sessions', exact: true }).click();
  await page.locator(`tr[data-session="${sessionId}"]`).waitFor();
  await screenshot(page, 'sessions');
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');

  await page.emulateMedia({ colorScheme: 'dark' });
  await page.goto(`${d.base}#/sessions/${sessionId}`);
  await page.locator('tr[data-file="cpa.png"]').waitFor();
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '', 'dark mode is readable too');
  await screenshot(page, 'session-dark');

  assert.deepEqual(problems, []);
  assert.ok(
    requests.every((u) => !u.includes(KEY_A)),
    'the key never goes into a URL',
  );
});
