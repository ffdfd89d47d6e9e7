import { ApiError } from './status.ts';

/** A request as the API server's authorizer sees it, plus the raw method and path. */
export interface RequestInfo {
  method: string;
  path: string;
  verb: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/** Which requests a fault hits; every given field must match. */
export interface FaultMatch {
  verb?: string;
  resource?: string;
  subresource?: string;
  name?: string | RegExp;
  method?: string;
  path?: RegExp;
}

/**
 * What the API server does instead of answering: a Status error (`status` with `retryAfterSeconds` for 429/503),
 * a connection reset, a request that never answers, or an answer delayed by `delayMs` and then given normally.
 */
export type FaultAction =
  | { status: number; reason?: string; message?: string; retryAfterSeconds?: number }
  | { reset: true }
  | { hang: true }
  | { delayMs: number };

export interface Fault {
  match: FaultMatch;
  action: FaultAction;
  /** How many matching requests it hits before it is spent; Infinity for all. Default 1. */
  times?: number;
}

/** The reason an API server gives with each status code. */
const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  410: 'Expired',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** Ready-made faults for the failures an API server answers with (transient, admission, validation). */
export const FAULTS = {
  tooManyRequests: (retryAfterSeconds = 1): FaultAction => ({
    status: 429,
    retryAfterSeconds,
    message: 'Too many requests, please try again later.',
  }),
  internalError: (): FaultAction => ({
    status: 500,
    message: 'Internal error occurred: etcdserver: request timed out',
  }),
  unavailable: (retryAfterSeconds = 1): FaultAction => ({
    status: 503,
    retryAfterSeconds,
    message: 'The server is currently unable to handle the request',
  }),
  reset: (): FaultAction => ({ reset: true }),
  hang: (): FaultAction => ({ hang: true }),
  quotaExceeded: (name: string): FaultAction => ({
    status: 403,
    message:
      `pods "${name}" is forbidden: exceeded quota: sandbox-quota, ` +
      'requested: pods=1, used: pods=10, limited: pods=10',
  }),
  podSecurity: (name: string): FaultAction => ({
    status: 403,
    message:
      `pods "${name}" is forbidden: violates PodSecurity "restricted:latest": ` +
      'allowPrivilegeEscalation != false (container "runner" must set securityContext.allowPrivilegeEscalation=false)',
  }),
  invalid: (name: string): FaultAction => ({
    status: 422,
    message: `Pod "${name}" is invalid: spec.containers[0].image: Required value`,
  }),
} as const;

/** The faults a test armed, consumed in order by the requests they match. */
export class Faults {
  readonly #armed: { fault: Fault; left: number }[] = [];

  /** Arms a fault; it hits the next `times` matching requests (default 1). */
  inject(fault: Fault): void {
    this.#armed.push({ fault, left: fault.times ?? 1 });
  }

  clear(): void {
    this.#armed.length = 0;
  }

  /** The action for this request, spending one use of the first fault that matches it. */
  take(req: RequestInfo): FaultAction | undefined {
    const hit = this.#armed.find((a) => a.left > 0 && matchesRequest(a.fault.match, req));
    if (!hit) return undefined;
    hit.left--;
    return hit.fault.action;
  }
}

function matchesRequest(m: FaultMatch, r: RequestInfo): boolean {
  if (m.verb !== undefined && m.verb !== r.verb) return false;
  if (m.resource !== undefined && m.resource !== r.resource) return false;
  if (m.subresource !== undefined && m.subresource !== r.subresource) return false;
  if (m.method !== undefined && m.method !== r.method) return false;
  if (m.path !== undefined && !m.path.test(r.path)) return false;
  if (m.name !== undefined && !(typeof m.name === 'string' ? m.name === r.name : m.name.test(r.name ?? '')))
    return false;
  return true;
}

export function faultError(action: {
  status: number;
  reason?: string;
  message?: string;
  retryAfterSeconds?: number;
}): ApiError {
  const headers: Record<string, string> =
    action.retryAfterSeconds === undefined ? {} : { 'retry-after': String(action.retryAfterSeconds) };
  const details = action.retryAfterSeconds === undefined ? undefined : { retryAfterSeconds: action.retryAfterSeconds };
  return new ApiError(
    action.status,
    action.reason ?? REASONS[action.status] ?? 'Unknown',
    action.message ?? `injected ${action.status}`,
    details,
    headers,
  );
}
