import { Type, type Static } from '@sinclair/typebox';

/**
 * Every machine-readable error code sandgate answers with, and its HTTP status.
 * These codes are public API: add new ones, never rename.
 */
export const ERROR_STATUS = {
  bad_request: 400,
  invalid_cursor: 400,
  invalid_json: 400,
  validation_failed: 400,
  invalid_path: 400,
  unsupported_language: 400,
  webhook_not_allowed: 400,
  unauthorized: 401,
  forbidden: 403,
  template_not_allowed: 403,
  origin_not_allowed: 403,
  not_found: 404,
  script_not_found: 404,
  tool_not_found: 404,
  service_not_found: 404,
  session_not_found: 404,
  execution_not_found: 404,
  file_not_found: 404,
  snapshot_not_found: 404,
  template_not_found: 404,
  volume_not_found: 404,
  method_not_allowed: 405,
  not_acceptable: 406,
  request_timeout: 408,
  file_exists: 409,
  script_exists: 409,
  session_busy: 409,
  service_exists: 409,
  service_not_running: 409,
  execution_finished: 409,
  snapshot_exists: 409,
  max_snapshots: 409,
  nothing_to_undo: 409,
  template_in_use: 409,
  template_not_ready: 409,
  template_from_file: 409,
  volume_exists: 409,
  volume_in_use: 409,
  max_volumes: 409,
  payload_too_large: 413,
  storage_quota_exceeded: 413,
  state_too_large: 413,
  volume_full: 413,
  unsupported_media_type: 415,
  range_not_satisfiable: 416,
  template_build_failed: 422,
  host_not_allowed: 421,
  headers_too_large: 431,
  max_sessions: 429,
  rate_limited: 429,
  quota_exceeded: 429,
  too_many_services: 429,
  too_many_terminals: 429,
  too_many_metric_streams: 429,
  max_templates: 429,
  internal: 500,
  unsupported_by_backend: 501,
  service_unreachable: 502,
  sandbox_unreachable: 502,
  backend_unavailable: 503,
  not_ready: 503,
  redis_unavailable: 503,
  insufficient_storage: 507,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export const ErrorCodeSchema = Type.Union(
  (Object.keys(ERROR_STATUS) as ErrorCode[]).map((c) => Type.Literal(c)),
  { $id: 'ErrorCode', description: 'Stable machine-readable error code.' },
);

/** RFC 9457 problem details, with sandgate's stable `code`. */
export const ProblemSchema = Type.Object(
  {
    type: Type.String({ description: 'URI identifying the problem type.' }),
    title: Type.String(),
    status: Type.Integer(),
    code: Type.String({ description: 'Stable machine-readable error code (see ErrorCode).' }),
    detail: Type.String({ description: 'Human-readable explanation of this occurrence.' }),
    instance: Type.Optional(Type.String()),
    retry_after: Type.Optional(
      Type.Integer({
        minimum: 0,
        description: 'Seconds to wait before retrying (also the Retry-After header).',
      }),
    ),
    errors: Type.Optional(
      Type.Array(Type.Object({ path: Type.String(), message: Type.String() }), {
        description: 'Validation failures, one per bad field.',
      }),
    ),
    log: Type.Optional(
      Type.String({ description: 'template_build_failed: the end of the build log (GET /v1/templates/{name}).' }),
    ),
  },
  { $id: 'Problem', title: 'Problem' },
);
export type Problem = Static<typeof ProblemSchema>;

/** A failure with a public code; the gateway's error handler renders it as problem+json. */
export class SandgateError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly extra: Record<string, unknown> | undefined;
  constructor(code: ErrorCode, detail: string, options?: { cause?: unknown; extra?: Record<string, unknown> }) {
    super(detail, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SandgateError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.extra = options?.extra;
  }
}

export function isSandgateError(e: unknown): e is SandgateError {
  return e instanceof SandgateError;
}
