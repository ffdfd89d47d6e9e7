import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  KEY_A,
  accessibilityProblems,
  openPage,
  screenshot,
  signIn,
  startDashboardStack,
  typeCode,
  type DashboardStack,
} from './browser.ts';

let d: DashboardStack;
before(async () => {
  d = await startDashboardStack();
});
after(() => d.close());

const LINES = 16;
const COUNTING = `import time\nfor i in range(${LINES}):\n    print(f"line {i}", flush=True)\n    time.sleep(0.4)\n`;
const expected = Array.from({ length: LINES }, (_, i) => `line ${i}`);

test('a run page survives a dropped connection and a reload: every line shown once, in order', async () => {
  const { page, problems } = await openPage(d);
  const eventRequests: { lastEventId: string | undefined }[] = [];
  page.on('request', (r) => {
    if (r.url().endsWith('/events')) eventRequests.push({ lastEventId: r.headers()['last-event-id'] });
  });
  await signIn(page, d.base, KEY_A);
  const exec = (await d.stack.api('POST', '/v1/executions', { language: 'python', code: COUNTING })).body as {
    id: string;
  };
  await page.goto(`${d.base}#/runs/${exec.id}`);
  const output = page.locator('.live-run .console');

  await output.filter({ hasText: /^line 2$/m }).waitFor();
  assert.ok(d.proxy.dropAll() > 0, 'the event stream was cut');
  await output.filter({ hasText: /^line 5$/m }).waitFor();
  assert.match(await page.locator('.live-run .connection').innerText(), /resumed 1×/);
  assert.equal(await page.locator('.live-run').getAttribute('data-state'), 'running', 'resumed while the run went on');

  await page.reload();
  await output.filter({ hasText: /^line 5$/m }).waitFor();
  await page.locator('.live-run[data-state="completed"]').waitFor({ timeout: 60_000 });
  assert.deepEqual((await output.innerText()).trim().split('\n'), expected);

  // The first request started from the beginning; the reconnect and the reload each resumed after what was shown.
  assert.ok(eventRequests.length >= 3, JSON.stringify(eventRequests));
  assert.equal(eventRequests[0]!.lastEventId, undefined);
  for (const r of eventRequests.slice(1)) assert.match(r.lastEventId ?? '', /^\d+-\d+$/, 'resumed with Last-Event-ID');
  assert.deepEqual(problems, []);
});

test('a long run is cancelled from the page that started it', async () => {
  const { page, problems } = await openPage(d);
  page.on('dialog', (dialog) => void dialog.accept());
  await signIn(page, d.base, KEY_A);
  await page.getByRole('link', { name: 'New run' }).click();
  await typeCode(
    page,
    page.getByRole('form', { name: 'run code' }),
    'import time\nprint("sleeping", flush=True)\ntime.sleep(120)\n',
  );
  await page.getByLabel('Timeout (s)').fill('60');
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  const run = page.locator('.live-run');
  await run.locator('.console').getByText('sleeping').waitFor();
  await screenshot(page, 'new-run');
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');
  await run.getByRole('button', { name: 'Cancel' }).click();
  await page.locator('.live-run[data-state="cancelled"]').waitFor({ timeout: 30_000 });
  assert.match(await run.locator('.result').innerText(), /reason\s*cancelled/);
  assert.equal(await run.getByRole('button', { name: 'Cancel' }).count(), 0, 'an ended run has nothing to cancel');
  const id = (await run.getAttribute('data-execution'))!;
  assert.equal((await d.stack.api('GET', `/v1/executions/${id}`)).body.state, 'cancelled');
  assert.deepEqual(problems, []);
});

test("a test-mode run's page lists each test with its outcome and error, and the counts", async () => {
  const { page, problems } = await openPage(d);
  await signIn(page, d.base, KEY_A);
  const exec = (
    await d.stack.api('POST', '/v1/executions', {
      mode: 'test',
      language: 'python',
      code: 'def add(a, b):\n    return a + b\n',
      tests:
        'import pytest\nfrom main import add\n\ndef test_adds():\n    assert add(1, 2) == 3\n\n' +
        'def test_wrong():\n    assert add(1, 1) == 3, "one and one"\n\n' +
        '@pytest.mark.skip(reason="later")\ndef test_later():\n    pass\n',
    })
  ).body as { id: string };
  await page.goto(`${d.base}#/runs/${exec.id}`);
  await page.locator('.live-run[data-state="failed"]').waitFor({ timeout: 60_000 });
  const tests = page.getByRole('region', { name: 'tests' });
  assert.match(await tests.getByRole('heading').innerText(), /1 passed, 1 failed, 1 skipped of 3/);
  const rows = await tests
    .locator('tbody tr')
    .evaluateAll((trs) => trs.map((tr) => [tr.querySelector('code')!.textContent, tr.getAttribute('data-outcome')]));
  assert.deepEqual(rows, [
    ['test_adds', 'passed'],
    ['test_wrong', 'failed'],
    ['test_later', 'skipped'],
  ]);
  assert.match(await tests.locator('tr[data-outcome="failed"] .test-error').innerText(), /one and one/);
  assert.equal(await accessibilityProblems(page).then((p) => p.join('\n')), '');
  assert.deepEqual(problems, []);
});
