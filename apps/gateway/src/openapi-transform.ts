import type { FastifySchema, RouteOptions } from 'fastify';

/** What the OpenAPI document says of a route beyond the schemas Fastify validates and serialises with. */
export interface OpenApiExtras {
  /** Request body media types the route reads itself (multipart, raw bytes), by media type. */
  body?: Record<string, { schema: unknown }>;
  /** Responses the route writes itself (streams, files), by status: a whole OpenAPI Response Object each. */
  responses?: Record<string, unknown>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    openapi?: OpenApiExtras;
  }
}

/** A Fastify wildcard (`/files/*`) as the document names it: a parameter that may contain `/`. */
export const WILDCARD_PARAM = 'path';
const WILDCARD_DESCRIPTION =
  "A path relative to the session's (or volume's) root. It may contain `/` (sent as is or as %2F); " +
  'no `..`, no absolute path.';

const PROBLEM_REF = 'Problem';
const PROBLEM_DESCRIPTIONS: Record<string, string> = {
  400: 'The request is malformed or invalid (validation_failed, invalid_json, invalid_path, invalid_cursor, …)',
  401: 'No valid API key (unauthorized)',
  403: "The request's Origin is not allowed (origin_not_allowed, forbidden)",
  404:
    'No such resource for this tenant (session_not_found, execution_not_found, file_not_found, volume_not_found, ' +
    'not_found)',
  405: 'Method not allowed',
  409: 'Conflicts with the current state (file_exists, session_busy, volume_exists, volume_in_use, max_volumes)',
  413:
    "Too large (payload_too_large), past the tenant's storage quota (storage_quota_exceeded), or past a volume's " +
    'size (volume_full)',
  415: 'Unsupported Content-Type (unsupported_media_type)',
  416: 'The Range cannot be satisfied (range_not_satisfiable)',
  421: "This gateway does not answer to the request's Host (host_not_allowed)",
  429:
    'A limit or quota was reached (rate_limited, quota_exceeded, max_sessions, too_many_services, too_many_terminals, ' +
    'too_many_metric_streams); ' +
    'see Retry-After',
  500: 'Internal error',
  502: "The session's sandbox did not answer as it should (service_unreachable, sandbox_unreachable)",
  503: 'Not ready, or a dependency is unavailable (not_ready, backend_unavailable)',
  507: 'The server is short of disk for files (insufficient_storage)',
};
const RETRY_AFTER = { 'retry-after': { type: 'integer', minimum: 1, description: 'Seconds to wait before retrying.' } };

const isProblemRef = (r: unknown) =>
  typeof r === 'object' && r !== null && (r as { $ref?: unknown }).$ref === PROBLEM_REF;

/** An error response as served: RFC 9457 problem details, `application/problem+json`. */
export function problemResponse(status: string): Record<string, unknown> {
  return {
    description: PROBLEM_DESCRIPTIONS[status] ?? 'Error',
    ...(status === '429' || status === '503' ? { headers: RETRY_AFTER } : {}),
    content: { 'application/problem+json': { schema: { $ref: PROBLEM_REF } } },
  };
}

type Params = { type?: string; properties?: Record<string, unknown>; required?: string[] };

function renameWildcard(params: Params | undefined): Params | undefined {
  if (!params?.properties?.['*']) return params;
  const { '*': star, ...rest } = params.properties;
  return {
    ...params,
    properties: { ...rest, [WILDCARD_PARAM]: { ...(star as object), description: WILDCARD_DESCRIPTION } },
    required: (params.required ?? []).map((n) => (n === '*' ? WILDCARD_PARAM : n)),
  };
}

/**
 * @fastify/swagger's `transform`: the document as clients must see it, without touching what Fastify validates.
 * Wildcards become `{path}`; every problem response is `application/problem+json`; a route's `config.openapi` adds
 * the bodies and responses it reads and writes itself (multipart, raw uploads, downloads, SSE).
 */
export function openApiTransform({ schema, url, route }: { schema: FastifySchema; url: string; route: RouteOptions }) {
  if (!schema) return { schema, url };
  const extras = route.config?.openapi ?? {};
  const out: Record<string, unknown> = { ...schema };
  let path = url;
  if (url.endsWith('/*')) {
    path = `${url.slice(0, -1)}:${WILDCARD_PARAM}`;
    out.params = renameWildcard(schema.params as Params);
  }
  if (extras.body) {
    const json = (schema.body as { content?: Record<string, unknown> } | undefined)?.content ?? {};
    out.body = { content: { ...extras.body, ...json } };
  }
  // Every route that reads a body answers 413 past its body limit (Fastify refuses it before the handler).
  const sized = schema.body || extras.body ? { 413: { $ref: PROBLEM_REF } } : {};
  const responses = { ...sized, ...(schema.response as Record<string, unknown> | undefined), ...extras.responses };
  out.response = Object.fromEntries(
    Object.entries(responses).map(([status, r]) => [status, isProblemRef(r) ? problemResponse(status) : r]),
  );
  return { schema: out as FastifySchema, url: path };
}
