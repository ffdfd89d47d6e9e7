import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { KEY_A, accessibilityProblems, openPage, screenshot, signIn, startDashboardStack } from './browser.ts';

/*
 * GET /v1/system/stats comes with the operator endpoints. Until a gateway serves it (404), the page must
 * say the view is unavailable; once it does, the page must show its figures and follow them live, with
 * each worker's backend state. The stack runs open, where operator endpoints are open like every other.
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

    // Each worker's backend: usable, or unusable with the reason (a second worker whose engine is not there).
    const backend = (id: string) => page.locator(`tr[data-worker="${id}"] td[data-backend-state]`);
    await backend(d.stack.worker!.id).and(page.locator('[data-backend-state="usable"]')).waitFor();
    const socket = join(d.stack.config.dataDir, 'no-engine.sock');
    const broken = await d.stack.startWorker(undefined, { SANDGATE_DOCKER_SOCKET: socket, SANDGATE_POOL_SIZE: '0' });
    await backend(broken.id)
      .and(page.locator('[data-backend-state="unusable"]'))
      .filter({ hasText: `engine unreachable: connect ENOENT ${socket}` })
      .waitFor({ timeout: 15_000 });
    assert.equal(await page.getByText("No worker's backend is usable").count(), 0, 'one worker can still run');
  }
  await screenshot(page, 'operator');
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');
  assert.deepEqual(problems, []);
});

const OPERATOR_KEY = 'dashboard-operator-key-0123456789';

test('an operator key opens the operator view alone; a tenant key is told it needs one', async (t) => {
  const d = await startDashboardStack({ env: { SANDGATE_OPERATOR_KEYS: OPERATOR_KEY } });
  t.after(() => d.close());
  const asOperator = await d.stack.api('GET', '/v1/system/stats', undefined, {
    authorization: `Bearer ${OPERATOR_KEY}`,
  });
  const asTenant = await d.stack.api('GET', '/v1/system/stats');
  const { page, problems } = await openPage(d);

  await page.goto(d.base);
  await page.getByLabel('API key').fill(OPERATOR_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  if (asOperator.status === 200) {
    await page.locator('[data-figure="queue.waiting"]').waitFor();
    assert.deepEqual(await page.getByRole('navigation', { name: 'main' }).getByRole('link').allInnerTexts(), [
      'Operator',
    ]);
    await page.goto(`${d.base}#/sessions`);
    await page.locator('[data-figure="queue.waiting"]').waitFor();
    assert.equal(await page.locator('tr[data-session]').count(), 0);
    await page.getByRole('button', { name: 'Sign out' }).click();
  } else {
    // A gateway without the operator endpoints knows no operator key.
    await page.getByRole('alert').filter({ hasText: 'This API key is not valid.' }).waitFor();
  }

  await signIn(page, d.base, KEY_A);
  await page.getByRole('link', { name: 'Operator' }).click();
  const notice = asTenant.status === 403 ? 'needs an operator key' : 'Operator view unavailable';
  assert.ok(
    asTenant.status === 403 || asTenant.status === 404,
    `GET /v1/system/stats with a tenant key: ${asTenant.status}`,
  );
  await page.getByRole('status').filter({ hasText: notice }).waitFor();
  assert.deepEqual(problems, []);
});
