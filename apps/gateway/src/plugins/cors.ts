import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import cors from '@fastify/cors';
import type { Config } from '@sandgate/config';

/** What a browser page may send: the key, JSON, SSE resumption, ranges and conditional downloads, MCP's headers. */
const ALLOWED_HEADERS = [
  'authorization',
  'content-type',
  'last-event-id',
  'range',
  'if-range',
  'if-none-match',
  'mcp-session-id',
  'mcp-protocol-version',
];
/** What a page's script may read of a response: links, limits, download metadata, ids. */
const EXPOSED_HEADERS = [
  'location',
  'retry-after',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'etag',
  'content-disposition',
  'content-range',
  'content-length',
  'x-request-id',
  'mcp-session-id',
  'www-authenticate',
];

/**
 * CORS for the origins of SANDGATE_CORS_ORIGINS (none by default): their preflights are answered before any key is
 * asked for, and their requests get Access-Control-* headers. No credentials: the API key travels in a header a
 * page's script sets, not in a cookie. Any other origin gets no CORS header (the browser then refuses to read).
 */
export const corsPlugin = fp(async (app: FastifyInstance, { config }: { config: Config }) => {
  const allowed = new Set(config.corsOrigins.map((o) => new URL(o).origin));
  // @fastify/cors's own preflight route answers only the origins above; any other preflight is a plain 404.
  app.addHook('onRoute', (route) => {
    if (route.method === 'OPTIONS' && route.url === '*') route.config = { ...(route.config as object), public: true };
  });
  await app.register(cors, {
    origin: (origin, cb) => {
      let normal: string | null = null;
      try {
        normal = origin ? new URL(origin).origin : null;
      } catch {
        /* not a URL: not allowed */
      }
      cb(null, normal !== null && allowed.has(normal) ? origin! : false);
    },
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE'],
    allowedHeaders: ALLOWED_HEADERS,
    exposedHeaders: EXPOSED_HEADERS,
    credentials: false,
    maxAge: 600,
  });
});
