import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page, Route } from 'playwright-core';
import type { Stack } from '../harness.ts';
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

/** Runs Python in the session through the API and waits for it. */
async function run(s: Stack, session: string, code: string) {
  const r = await s.api('POST', '/v1/executions?wait=120', { session_id: session, language: 'python', code });
  assert.equal(r.body.result?.state, 'completed', JSON.stringify(r.body.result));
  return r.body;
}

const fileText = async (s: Stack, session: string, path: string) =>
  (await fetch(`${s.url}/files/${session}/${path}`, { headers: { authorization: `Bearer ${KEY_A}` } })).text();

/**
 * Holds the next request whose URL ends with `suffix` until `release()` is called, so a test can see the page while
 * the request is going; the request then goes on to the gateway unchanged.
 */
async function hold(page: Page, suffix: string) {
  let held: Route | undefined;
  const pattern = (url: URL) => url.pathname.endsWith(suffix);
  await page.route(pattern, (route) => {
    held = route;
  });
  return {
    async release() {
      await until(`a request to …${suffix}`, async () => held);
      await held!.continue();
      await page.unroute(pattern);
    },
  };
}

test('a session that lasts, from the dashboard: template picker, pause and resume, snapshots, fork, undo', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-dashboard-lifecycle-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  // A template that names its image is ready without a build: the picker is what is tested here.
  const templates = join(dir, 'templates.yaml');
  const image = process.env.SANDGATE_IMAGE ?? 'sandgate/runtime:1';
  await writeFile(
    templates,
    `templates:\n  - name: tables\n    description: the runtime image, by name\n    image: ${image}\n` +
      '    env:\n      FLAVOUR: tables\n',
  );
  // On the quick start's btrfs data disk, where undo keeps its steps.
  const d = await startDashboardStack({ env: { SANDGATE_TEMPLATES: templates }, diskQuotas: true });
  const s = d.stack;
  t.after(() => d.close());
  const { page, problems } = await openPage(d);
  page.on('dialog', (dialog) => void dialog.accept());
  await signIn(page, d.base, KEY_A);
  const noAxeProblems = async () => assert.equal((await accessibilityProblems(page)).join('\n'), '');
  const panel = page.getByRole('region', { name: 'session', exact: true });
  const badge = panel.locator('.badge').first();
  const lifecycle = page.getByRole('group', { name: 'lifecycle' });

  // The session form offers the tenant's templates; the session is made of the one chosen.
  await page.getByLabel('Template').selectOption('tables');
  await page.getByRole('button', { name: 'Create session' }).click();
  const id = await until('the session page', async () => /#\/sessions\/(sess_[0-9a-f]{12})$/.exec(page.url())?.[1]);
  assert.equal((await s.api('GET', `/v1/sessions/${id}`)).body.template, 'tables');
  await panel.locator('dd', { hasText: 'tables' }).waitFor();
  await run(s, id, "open('notes.txt', 'w').write('first')");

  await t.test(
    'Pause says it is pausing while it goes, then the session is paused; Resume brings it back',
    async () => {
      const pausing = await hold(page, '/pause');
      await lifecycle.getByRole('button', { name: 'Pause' }).click();
      const busy = lifecycle.getByRole('button', { name: 'Pausing…' });
      await busy.waitFor();
      assert.equal(await busy.isDisabled(), true);
      assert.equal(await lifecycle.getByRole('button', { name: 'Fork' }).isDisabled(), true, 'one action at a time');
      await pausing.release();
      await lifecycle.getByRole('button', { name: 'Resume' }).waitFor();
      await until('the badge says paused', async () => (await badge.innerText()) === 'paused');
      await lifecycle.getByRole('status').filter({ hasText: 'Paused' }).waitFor();
      assert.equal((await s.api('GET', `/v1/sessions/${id}`)).body.state, 'paused');
      assert.equal(await s.sessionSandbox(id), undefined);
      await panel.getByText('paused', { exact: true }).first().waitFor();
      await screenshot(page, 'session-paused');
      await noAxeProblems();

      await lifecycle.getByRole('button', { name: 'Resume' }).click();
      await lifecycle.getByRole('button', { name: 'Pause' }).waitFor();
      await until('the badge says idle', async () => (await badge.innerText()) === 'idle');
      assert.equal((await s.api('GET', `/v1/sessions/${id}`)).body.state, 'idle');
    },
  );

  const snapshots = page.getByRole('region', { name: 'snapshots' });
  await t.test('snapshots: taken, a name taken twice refused, restored in place and into a new session', async () => {
    await snapshots.getByText('No snapshots yet.').waitFor();
    await snapshots.getByLabel('Snapshot name').fill('base');
    await snapshots.getByRole('button', { name: 'Take snapshot' }).click();
    const row = snapshots.locator('tr[data-snapshot="base"]');
    await row.waitFor();
    assert.equal(await row.locator('td').nth(2).innerText(), 'files');

    await snapshots.getByLabel('Snapshot name').fill('base');
    await snapshots.getByRole('button', { name: 'Take snapshot' }).click();
    await snapshots.getByRole('alert').filter({ hasText: 'snapshot_exists' }).waitFor();
    await noAxeProblems();

    await run(s, id, "open('notes.txt', 'w').write('second')");
    await row.getByRole('button', { name: 'Restore base', exact: true }).click();
    await until('the badge says paused', async () => (await badge.innerText()) === 'paused');
    assert.equal(await fileText(s, id, 'notes.txt'), 'first');

    await row.getByRole('button', { name: 'Restore base into a new session' }).click();
    const made = await until('the new session page', async () => {
      const m = /#\/sessions\/(sess_[0-9a-f]{12})$/.exec(page.url())?.[1];
      return m && m !== id ? m : undefined;
    });
    await panel.getByRole('link', { name: id }).waitFor();
    assert.equal((await s.api('GET', `/v1/sessions/${made}`)).body.forked_from, id);
    assert.equal(await fileText(s, made, 'notes.txt'), 'first');
    await page.goto(`${d.base}#/sessions/${id}`);
    await snapshots.locator('tr[data-snapshot="base"]').waitFor();
  });

  await t.test('Fork makes the copies asked for and links them', async () => {
    await lifecycle.getByLabel('Copies').selectOption('2');
    await lifecycle.getByRole('button', { name: 'Fork' }).click();
    const note = lifecycle.getByRole('status').filter({ hasText: 'Forked into' });
    await note.waitFor();
    const copies = await note.getByRole('link').allInnerTexts();
    assert.equal(copies.length, 2);
    for (const copy of copies) {
      const body = (await s.api('GET', `/v1/sessions/${copy}`)).body;
      assert.equal(body.forked_from, id);
      assert.equal(body.state, 'paused');
    }
  });

  await t.test('Undo last run brings the files back; with nothing left to undo it says so', async () => {
    const broken = await run(s, id, "import os\nos.remove('notes.txt')");
    await lifecycle.getByRole('button', { name: 'Undo last run' }).click();
    await lifecycle
      .getByRole('status')
      .filter({ hasText: `Undid run ${broken.id}` })
      .waitFor();
    await page.locator('tr[data-file="notes.txt"]').waitFor();
    assert.equal(await fileText(s, id, 'notes.txt'), 'first');
    await screenshot(page, 'session-lifecycle');
    await noAxeProblems();

    // Undo every step that is left, one run further back each time, then once more: nothing is left.
    const said = await lifecycle.getByRole('status').innerText();
    let remaining = Number(/(\d+) more can be undone/.exec(said)?.[1]);
    assert.ok(Number.isInteger(remaining), said);
    while (remaining > 0) {
      await lifecycle.getByRole('button', { name: 'Undo last run' }).click();
      remaining--;
      await lifecycle
        .getByRole('status')
        .filter({ hasText: `; ${remaining} more can be undone` })
        .waitFor();
    }
    await lifecycle.getByRole('button', { name: 'Undo last run' }).click();
    await lifecycle.getByRole('alert').filter({ hasText: 'nothing_to_undo' }).waitFor();
  });

  await t.test('a snapshot is deleted from its row', async () => {
    await snapshots.getByRole('button', { name: 'Delete snapshot base' }).click();
    await snapshots.getByText('No snapshots yet.').waitFor();
    assert.deepEqual((await s.api('GET', `/v1/sessions/${id}/snapshots`)).body.snapshots, []);
  });

  await t.test('dark mode and a phone-sized screen: the session page passes the axe check', async () => {
    const dark = await openPage(d, { colorScheme: 'dark', width: 390 });
    t.after(() => dark.context.close());
    await signIn(dark.page, d.base, KEY_A);
    await dark.page.goto(`${d.base}#/sessions/${id}`);
    await dark.page.getByRole('group', { name: 'lifecycle' }).getByRole('button', { name: 'Fork' }).waitFor();
    await dark.page.getByRole('region', { name: 'snapshots' }).getByText('No snapshots yet.').waitFor();
    await screenshot(dark.page, 'session-lifecycle-dark');
    assert.equal((await accessibilityProblems(dark.page)).join('\n'), '');
    assert.deepEqual(dark.problems, []);
  });

  await t.test('the sessions list shows the paused copies as paused', async () => {
    await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Sessions' }).click();
    const paused = page.locator('table[aria-label="sessions"] .badge', { hasText: 'paused' });
    await until('paused sessions listed', async () => (await paused.count()) >= 2);
    await noAxeProblems();
    assert.deepEqual(problems, []);
  });

  await t.test('the new run form offers the templates for a one-shot, which then runs on the one chosen', async () => {
    await page.getByRole('link', { name: 'New run' }).click();
    const form = page.getByRole('form', { name: 'run code' });
    await form.getByLabel('Template').selectOption('tables');
    await typeCode(page, form, 'import os\nprint("flavour", os.environ.get("FLAVOUR"))\n');
    await form.getByRole('button', { name: 'Run', exact: true }).click();
    await page.locator('.live-run .console').getByText('flavour tables').waitFor();
    await noAxeProblems();
    // A run in a session takes the session's template: the picker is for one-shots only.
    await form.getByLabel('Session').selectOption({ index: 1 });
    assert.equal(await form.getByLabel('Template').count(), 0);
    assert.deepEqual(problems, []);
  });
});
