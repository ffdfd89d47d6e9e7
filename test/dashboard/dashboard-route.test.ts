import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApp } from '@sandgate/gateway';
import { ensureDashboardBuilt } from '@sandgate/dashboard/build';
import { startStack } from '../harness.ts';
import { KEY_A } from './browser.ts';

test('GET /dashboard/ serves the built page without a key, under a self-only CSP, hidden from OpenAPI', async (t) => {
  await ensureDashboardBuilt();
  const s = await startStack({ worker: false, env: { SANDGATE_API_KEYS: `${KEY_A}:tenantA` } });
  t.after(() => s.close());

  const bare = await fetch(`${s.url}/dashboard`, { redirect: 'manual' });
  assert.equal(bare.status, 308);
  assert.equal(bare.headers.get('location'), '/dashboard/');

  const page = await fetch(`${s.url}/dashboard/`);
  assert.equal(page.status, 200, 'public: the key is entered in the page');
  assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
  const csp = page.headers.get('content-security-policy') ?? '';
  assert.match(csp, /default-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:|\*/, 'nothing but this origin');
  assert.equal(page.headers.get('cache-control'), 'no-cache');
  assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
  const html = await page.text();
  assert.match(html, /<div id="app"><\/div>/);
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');

  const script = /src="(\/dashboard\/assets\/[^"]+\.js)"/.exec(html)?.[1];
  assert.ok(script, html);
  const asset = await fetch(s.url + script, { headers: { 'accept-encoding': 'br' } });
  assert.equal(asset.status, 200);
  assert.equal(asset.headers.get('content-encoding'), 'br', 'served precompressed');
  assert.match(asset.headers.get('content-type') ?? '', /javascript/);
  assert.equal(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  assert.doesNotMatch(
    await asset.text(),
    /https?:\/\/(?!127\.0\.0\.1|localhost|www\.w3\.org)[a-z0-9.-]+\.[a-z]{2,}\/[^"'\s]*\.(js|css|woff2?|png)/i,
    'the bundle loads nothing from another host',
  );

  for (const path of ['/dashboard/.source-hash', '/dashboard/nope.js']) {
    assert.equal((await fetch(s.url + path)).status, 404, path);
  }
  // Paths that climb out of the build are not dashboard routes at all: the API answers them, and wants a key.
  for (const path of [
    '/dashboard/%2e%2e/package.json',
    '/dashboard/..%2f..%2fpackage.json',
    '/dashboard/assets/%2e%2e/%2e%2e/src/index.ts',
  ]) {
    const res = await fetch(s.url + path);
    assert.ok(res.status === 401 || res.status === 404, `${path}: ${res.status}`);
    assert.doesNotMatch(await res.text(), /workspaces|DASHBOARD_DIR/, path);
  }
  const api = await fetch(`${s.url}/v1/sessions`);
  assert.equal(api.status, 401, 'the API behind it still wants a key');

  const doc = (await (await fetch(`${s.url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
  assert.deepEqual(
    Object.keys(doc.paths).filter((p) => p.startsWith('/dashboard')),
    [],
  );
});

test('a gateway without a built dashboard says how to build it', async (t) => {
  const s = await startStack({ worker: false });
  const empty = await mkdtemp(join(tmpdir(), 'sandgate-no-dashboard-'));
  const app = await buildApp(s.deps, { dashboardDir: empty });
  t.after(async () => {
    await app.close();
    await s.close();
    await rm(empty, { recursive: true, force: true });
  });
  const res = await app.inject({ method: 'GET', url: '/dashboard/' });
  assert.equal(res.statusCode, 503);
  assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
  const body = res.json() as { code: string; detail: string };
  assert.equal(body.code, 'not_ready');
  assert.match(body.detail, /npm run setup/);
});
