import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { KEY_A, accessibilityProblems, openPage, screenshot, signIn, startDashboardStack, until } from './browser.ts';

/** What the terminal's screen shows now, row by row. */
const screen = (page: Page) => page.locator('.xterm-rows').innerText();

/** Types a command into the terminal and answers what it printed between two markers. */
async function run(page: Page, command: string): Promise<string> {
  const tag = Math.random().toString(36).slice(2, 8);
  await page.keyboard.type(`echo "<${tag}"; ${command}; echo "${tag}>"`);
  await page.keyboard.press('Enter');
  const re = new RegExp(`\\n<${tag}\\n(?:([^]*?)\\n)?${tag}>`);
  const m = await until(`the output of ${command}`, async () => re.exec(await screen(page)));
  return m[1] ?? '';
}

test('the Terminal panel of a session page: type a command, see its output, resize', async (t) => {
  const d = await startDashboardStack();
  t.after(() => d.close());
  const s = d.stack;
  // Straight to the gateway: a terminal is opened only from the gateway's own origin (or an allowed one).
  const base = `${s.url}/dashboard/`;
  const { page, problems } = await openPage({ ...d, base });
  await signIn(page, base, KEY_A);
  const session = await s.api('POST', '/v1/sessions', {});
  const id = session.body.id as string;
  await page.goto(`${base}#/sessions/${id}`);
  const panel = page.getByRole('region', { name: 'terminal' });
  await panel.getByRole('button', { name: 'Open terminal' }).click();
  await panel.getByRole('button', { name: 'Close terminal' }).waitFor();
  // The first prompt comes once a login shell has started in a sandbox made for this session. Under load (several
  // dashboard files at once) the panel has shown no first prompt at all although the shell answered the next line:
  // an open defect (docs/terminal.md), so Enter asks for a prompt again when none came.
  const prompt = async () => /\$\s*$/m.test(await screen(page));
  await until('the first prompt', prompt, 30_000).catch(async () => {
    await page.locator('.xterm').click();
    await page.keyboard.press('Enter');
    await until('a prompt after Enter', prompt, 30_000);
  });
  await page.locator('.xterm').click();

  assert.equal(await run(page, 'echo "$((6 * 7))"'), '42');
  assert.match(await run(page, 'id -un; pwd'), /^sandbox\n\/mnt\/data$/);
  const [cols, rows] = (await run(page, 'stty size')).split(' ').reverse().map(Number) as [number, number];
  assert.ok(cols > 80 && rows > 10, `${cols}x${rows}: the panel's size, not the default`);
  await screenshot(page, 'terminal');
  const adopted = await page.evaluate(() =>
    document.adoptedStyleSheets.flatMap((sheet) => [...sheet.cssRules].map((r) => r.cssText)).join('\n'),
  );
  assert.match(adopted, /\.xterm/, "xterm.js's own rules are applied through constructed style sheets");

  // A narrower window: the terminal fits its columns, and the shell is told.
  await page.setViewportSize({ width: 800, height: 900 });
  const narrower = await until('the shell to see fewer columns', async () => {
    const [c] = (await run(page, 'stty size')).split(' ').reverse().map(Number) as [number];
    return c < cols && c;
  });
  assert.ok(narrower < cols);
  assert.equal(await run(page, 'tput cols'), String(narrower));

  // The session's file, written from the terminal, is the session's.
  await run(page, 'echo typed > from-terminal.txt');
  const file = await fetch(`${s.url}/files/${id}/from-terminal.txt`, { headers: { authorization: `Bearer ${KEY_A}` } });
  assert.equal(await file.text(), 'typed\n');

  // exit ends it: the panel says how.
  await page.keyboard.type('exit 5');
  await page.keyboard.press('Enter');
  await panel.getByRole('status').filter({ hasText: 'the shell exited with code 5' }).waitFor();
  await panel.getByRole('button', { name: 'Open terminal' }).waitFor();
  assert.equal((await accessibilityProblems(page)).join('\n'), '');
  // xterm.js adds <style> elements, which the policy refuses (and reports): their rules come through the constructed
  // style sheets instead (web/lib/adopt-styles.ts). Nothing else may be refused, and nothing leaves the origin.
  assert.deepEqual(
    problems.filter((p) => !/^CSP: Applying inline style violates .*'style-src 'self''/.test(p)),
    [],
  );
});
