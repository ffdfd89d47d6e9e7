import { test } from 'node:test';
import assert from 'node:assert/strict';
import { accessibilityProblems, openPage, screenshot, startDashboardStack } from './browser.ts';

/*
 * GET /v1/system/stats comes with the operator endpoints. Until a gateway serves it (404), the page must
 * say the view is unavailable; once it does, the page must show its figures and follow them live. The
 * stack runs open, where operator endpoints are open like every other.
 */
test("the operator view shows the deployment's figures live, or says it is unavailable", async (t) => {
  const d = await startDashboardStack({ open: true });
  t.after(() => d.close());
  const { page, problems } = await openPage(d);
  await page.goto(`${d.base}#/operator`);
  const served = (await d.stack.api('GET', '/v1/system/stats')).status;

  if (served === 404) {
    await page.getByRole('status').filter({ hasText: 'Operator view unavailable' }).waitFor();
  } else {
    assert.equal(served, 200);
    const figure = (name: string) => page.locator(`[data-figure="${name}"] dd`);
    await figure('queue.waiting').waitFor();
    const completed = Number(await figure('runs.completed').innerText());
    await page.locator(`tr[data-worker="${d.stack.worker!.id}"]`).waitFor();
    const run = await d.stack.api('POST', '/v1/executions?wait=60', { language: 'python', code: 'print(1)' });
    assert.equal(run.body.state, 'completed');
    await figure('runs.completed')
      .filter({ hasText: String(completed + 1) })
      .waitFor({ timeout: 15_000 });
  }
  await screenshot(page, 'operator');
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');
  assert.deepEqual(problems, []);
});
