import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { KEY_A, accessibilityProblems, openPage, screenshot, signIn, startDashboardStack, until } from './browser.ts';

/** How many pixels of a chart's canvas are drawn (not transparent): its axes, grid and lines. */
const inked = (page: Page, chart: string) =>
  page.locator(`[data-chart="${chart}"] canvas`).evaluate((c: HTMLCanvasElement) => {
    const data = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i]! > 0) n += 1;
    return n;
  });

test("a session page draws the session's metrics live", async (t) => {
  const d = await startDashboardStack({ env: { SANDGATE_MEMORY_LIMIT: '512m' } });
  t.after(() => d.close());
  const s = d.stack;
  const { page, problems } = await openPage(d);
  await signIn(page, d.base, KEY_A);
  const id = (await s.api('POST', '/v1/sessions', {})).body.id as string;
  const run = await s.api('POST', '/v1/executions?wait=60', { session_id: id, language: 'bash', code: 'true' });
  assert.equal(run.body.state, 'completed');
  await page.goto(`${d.base}#/sessions/${id}`);
  const panel = page.getByRole('region', { name: 'metrics' });
  const figure = (name: string) => panel.locator(`[data-metric="${name}"] dd`);
  await figure('sandbox').filter({ hasText: 'up' }).waitFor({ timeout: 30_000 });
  assert.match(await figure('memory').innerText(), / of 512(\.0)? MiB$/);
  assert.match(await figure('pids').innerText(), /^\d+$/);
  // CPU needs two samples; then the figure is a percentage.
  await figure('cpu_percent').filter({ hasText: /%$/ }).waitFor({ timeout: 30_000 });
  for (const chart of ['cpu', 'memory', 'disk', 'pids']) {
    await panel.locator(`[data-chart="${chart}"] canvas`).waitFor();
    assert.ok((await inked(page, chart)) > 0, `the ${chart} chart is drawn`);
  }
  // A process tree in the sandbox shows in the processes figure.
  const before = Number(await figure('pids').innerText());
  const tree = await s.api('POST', '/v1/executions', {
    session_id: id,
    language: 'bash',
    code: 'for i in 1 2 3 4 5 6; do sleep 120 & done; sleep 120',
  });
  await until('the processes figure to rise', async () => Number(await figure('pids').innerText()) >= before + 7);
  await s.api('POST', `/v1/executions/${tree.body.id}/cancel`);
  await screenshot(page, 'session-metrics');
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');
  assert.deepEqual(problems, []);
});

test("the operator page draws the deployment's last hour", async (t) => {
  const d = await startDashboardStack({ open: true, env: { SANDGATE_STATS_HISTORY_S: '1' } });
  t.after(() => d.close());
  const { page, problems } = await openPage(d);
  await page.goto(`${d.base}#/operator`);
  const run = await d.stack.api('POST', '/v1/executions?wait=60', { language: 'python', code: 'print(1)' });
  assert.equal(run.body.state, 'completed');
  const history = page.getByRole('region', { name: 'last hour' });
  await until('three samples drawn', async () => {
    const n = await history.locator('[data-history-points]').getAttribute('data-history-points');
    return Number(n) >= 3;
  });
  for (const chart of ['queue', 'runs-per-minute', 'pool-hits', 'live-sessions']) {
    await history.locator(`[data-chart="${chart}"] canvas`).waitFor();
    assert.ok((await inked(page, chart)) > 0, `the ${chart} chart is drawn`);
  }
  await screenshot(page, 'operator-history');
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');
  assert.deepEqual(problems, []);
});
