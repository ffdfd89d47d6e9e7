import { existsSync } from 'node:fs';
import { join } from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { SandgateError } from '@sandgate/contracts';

/**
 * Only this origin, for everything: the page, its scripts and styles, the API it calls (connect-src),
 * the previews it shows (img-src: signed /files links) and pdf.js's worker. No inline script or style
 * (CodeMirror styles through constructed style sheets, ANSI colours through the CSSOM).
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "worker-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

function securityHeaders(reply: FastifyReply, path: string) {
  reply.headers({
    'content-security-policy': DASHBOARD_CSP,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    // Built file names carry a content hash, so they never change; index.html is revalidated.
    'cache-control': path.includes('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache',
  });
}

/**
 * GET /dashboard/: the browser dashboard, static files built from apps/dashboard by `npm run setup`.
 * The routes are public (the key is entered in the page and sent by it as a header) and hidden from
 * the OpenAPI document; everything the page does goes through the public API.
 */
export async function dashboardRoutes(app: FastifyInstance, { dir }: { dir: string }) {
  app.get('/dashboard', { schema: { hide: true } }, (_req, reply) => reply.redirect('/dashboard/', 308));
  if (!existsSync(join(dir, 'index.html'))) {
    app.get('/dashboard/*', { schema: { hide: true } }, async () => {
      throw new SandgateError(
        'not_ready',
        'the dashboard is not built on this server: run `npm run setup` (or `npm run dashboard`)',
      );
    });
    return;
  }
  await app.register(fastifyStatic, {
    root: dir,
    prefix: '/dashboard/',
    schemaHide: true,
    decorateReply: false,
    dotfiles: 'ignore',
    cacheControl: false,
    // The build writes .br and .gz beside each script and style sheet.
    preCompressed: true,
    setHeaders: securityHeaders,
  });
}
