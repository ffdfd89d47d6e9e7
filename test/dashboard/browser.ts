/**
 * What the dashboard's browser tests share: a sandgate stack with API keys behind a drop proxy, the
 * dashboard built, headless Chromium (Debian's, driven by playwright-core), screenshots, and an axe-core
 * accessibility check. Every page is watched for requests to another origin and for CSP violations.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { ensureDashboardBuilt } from '@sandgate/dashboard/build';
import { startStack, until, type Stack } from '../harness.ts';
import { DropProxy } from './drop-proxy.ts';

export const CHROMIUM = '/usr/bin/chromium';
export const KEY_A = 'dashboard-key-tenant-a-0123456789';
export const KEY_B = 'dashboard-key-tenant-b-9876543210';
export const SCREENSHOTS = join(tmpdir(), 'sandgate-dashboard-screenshots');

export interface DashboardStack {
  stack: Stack;
  proxy: DropProxy;
  browser: Browser;
  base: string;
  close(): Promise<void>;
}

/**
 * A stack with two tenants' keys (or none: `open`), the dashboard built, a drop proxy in front, and Chromium;
 * `diskQuotas`: its data directory on the quick start's btrfs data disk (undo needs it).
 */
export async function startDashboardStack({
  env = {},
  open = false,
  diskQuotas = false,
}: { env?: Record<string, string>; open?: boolean; diskQuotas?: boolean } = {}): Promise<DashboardStack> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run \`npm run test:all\` (it installs Debian's chromium)`);
  await ensureDashboardBuilt();
  const stack = open
    ? await startStack({ env, diskQuotas })
    : await startStack({
        env: { SANDGATE_API_KEYS: `${KEY_A}:tenantA,${KEY_B}:tenantB`, ...env },
        apiKey: KEY_A,
        diskQuotas,
      });
  const proxy = await DropProxy.start(stack.url);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    // Without the background-networking flags Chromium calls Google hosts on its own.
    args: [
      '--no-sandbox',
      '--headless',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
  return {
    stack,
    proxy,
    browser,
    base: `${proxy.url}/dashboard/`,
    async close() {
      await browser.close();
      await proxy.close();
      await stack.close();
    },
  };
}

export interface WatchedPage {
  page: Page;
  context: BrowserContext;
  problems: string[];
  requests: string[];
}

/** A fresh context and page; `problems` collects requests off this origin, CSP violations and page errors. */
export async function openPage(
  d: DashboardStack,
  opts: { colorScheme?: 'light' | 'dark'; width?: number } = {},
): Promise<WatchedPage> {
  const context = await d.browser.newContext({
    acceptDownloads: true,
    colorScheme: opts.colorScheme ?? 'light',
    viewport: { width: opts.width ?? 1280, height: 900 },
  });
  const page = await context.newPage();
  const problems: string[] = [];
  const requests: string[] = [];
  const origin = new URL(d.base).origin;
  page.on('request', (r) => {
    requests.push(r.url());
    if (!r.url().startsWith(`${origin}/`) && !r.url().startsWith('blob:'))
      problems.push(`request off origin: ${r.url()}`);
  });
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(`CSP: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  return { page, context, problems, requests };
}

export async function signIn(page: Page, base: string, key: string): Promise<void> {
  await page.goto(base);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  // The pages, or the form's alert (a key refused, the gateway unreachable): a failed sign-in says which.
  const nav = page.getByRole('navigation', { name: 'main' });
  await nav.or(page.getByRole('alert')).first().waitFor();
  if (!(await nav.isVisible())) throw new Error(`sign-in failed: ${await page.getByRole('alert').first().innerText()}`);
}

export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

const axeSource = readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * axe-core's serious and critical violations on the page as it is. axe is evaluated through the
 * DevTools protocol, which the page's CSP does not govern, so the page keeps its real CSP.
 */
export async function accessibilityProblems(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(await axeSource);
  const result = await page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: {
          run(
            ctx: Document,
            o: object,
          ): Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }>;
        };
      }
    ).axe;
    return axe.run(document, { resultTypes: ['violations'] });
  });
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map(
      (v) =>
        `${v.id} (${v.impact}): ${v.help} at ${v.nodes
          .map((n) => n.target.join(' '))
          .slice(0, 3)
          .join(', ')}`,
    );
}

/** Types code into a CodeMirror editor as one insertion (typed keys would be auto-indented). */
export async function typeCode(page: Page, editor: ReturnType<Page['locator']>, code: string): Promise<void> {
  await editor.locator('.cm-content').click();
  await page.keyboard.press('ControlOrMeta+a');
  await page.keyboard.press('Delete');
  await page.keyboard.insertText(code);
}

export { until };
