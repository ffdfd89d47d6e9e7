import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KEY_A, accessibilityProblems, openPage, screenshot, signIn, startDashboardStack, until } from './browser.ts';

test('a notebook: cells share the interpreter, figures show inline, Shift+Enter runs, restart forgets', async (t) => {
  const d = await startDashboardStack();
  t.after(() => d.close());
  const { page, problems } = await openPage(d);
  await signIn(page, d.base, KEY_A);
  await page.getByLabel('Mode').selectOption('stateful');
  await page.getByRole('button', { name: 'Create session' }).click();
  const sessionId = await until(
    'the notebook page',
    async () => /#\/notebook\/(sess_[0-9a-f]{12})$/.exec(page.url())?.[1],
  );
  assert.equal((await d.stack.api('GET', `/v1/sessions/${sessionId}`)).body.mode, 'stateful');

  const cell = (n: number) => page.locator('li.cell').nth(n);
  const output = (n: number) => cell(n).locator('.cell-output');
  // Shift+Enter runs a cell and puts the cursor in the next one, so a person just keeps typing.
  await cell(0).locator('.cm-content').click();
  await page.keyboard.insertText('x = 41\nprint("x is set")');
  await page.keyboard.press('Shift+Enter');
  await output(0).filter({ hasText: 'x is set' }).waitFor();
  await page.keyboard.insertText('x + 1');
  await page.keyboard.press('Shift+Enter');
  await output(1).locator('.cell-value').waitFor();
  assert.equal(await output(1).locator('.cell-value').innerText(), '42', "the second cell sees the first cell's x");
  assert.equal(await cell(1).locator('.cell-count').innerText(), '[2]');

  await page.keyboard.insertText('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()');
  await page.keyboard.press('Shift+Enter');
  const figure = output(2).locator('li.artifact img');
  await figure.waitFor();
  await until('the figure to load', () => figure.evaluate((img) => (img as HTMLImageElement).naturalWidth > 0));
  assert.match((await output(2).locator('li.artifact').getAttribute('data-path'))!, /^figure-\d+\.png$/);
  await screenshot(page, 'notebook');
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');

  await page.getByRole('button', { name: 'Restart interpreter' }).click();
  await page.getByRole('status').filter({ hasText: 'Interpreter restarted' }).waitFor();
  await cell(3).locator('.cm-content').click();
  await page.keyboard.insertText('x');
  await page.keyboard.press('Shift+Enter');
  await output(3)
    .filter({ hasText: /NameError: name 'x' is not defined/ })
    .waitFor();
  assert.equal(await output(3).getAttribute('data-state'), 'failed');

  // The notebook's cells are still there after a reload (kept for this tab).
  await page.reload();
  await output(1).locator('.cell-value').filter({ hasText: '42' }).waitFor();
  assert.deepEqual(problems, []);
});
