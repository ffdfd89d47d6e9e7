/**
 * Errors as the API server sends them: a `Status` object with the HTTP code, a machine `reason` and the same
 * message wording, so a client's error handling meets here what it meets on a cluster.
 */
export interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export interface StatusBody {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

/** An API error: thrown by handlers, answered as a Status body with `code` as the HTTP status. */
export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: StatusDetails,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  toStatus(): StatusBody {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      ...(this.details === undefined ? {} : { details: this.details }),
      code: this.code,
    };
  }
}

/** `pods "x" not found`: the plural resource name, as the API server writes it. */
export const notFound = (resource: string, name: string): ApiError =>
  new ApiError(404, 'NotFound', `${resource} "${name}" not found`, { name, kind: resource });

export const alreadyExists = (resource: string, name: string): ApiError =>
  new ApiError(409, 'AlreadyExists', `${resource} "${name}" already exists`, { name, kind: resource });

export const conflict = (resource: string, name: string, why: string): ApiError =>
  new ApiError(409, 'Conflict', `Operation cannot be fulfilled on ${resource} "${name}": ${why}`, {
    name,
    kind: resource,
  });

/**
 * 422: `Pod "x" is invalid: spec.containers[0].name: Required value`, one cause per field. With a `group` the kind is
 * qualified by it (`ListOptions.meta.k8s.io "" is invalid: ...`) and an empty name is left out of the details.
 */
export function invalid(kind: string, name: string, causes: StatusCause[], group?: string): ApiError {
  const list = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message));
  const text = list.length === 1 ? list[0] : `[${list.join(', ')}]`;
  const qualified = group === undefined ? kind : `${kind}.${group}`;
  const details = group === undefined ? { name, kind, causes } : { ...(name ? { name } : {}), group, kind, causes };
  return new ApiError(422, 'Invalid', `${qualified} "${name}" is invalid: ${text}`, details);
}

export const badRequest = (message: string): ApiError => new ApiError(400, 'BadRequest', message);

export const forbidden = (resource: string, name: string, why: string): ApiError =>
  new ApiError(403, 'Forbidden', `${resource} "${name}" is forbidden: ${why}`, { name, kind: resource });

export const unauthorized = (): ApiError => new ApiError(401, 'Unauthorized', 'Unauthorized');

export const methodNotSupported = (resource: string, verb: string): ApiError =>
  new ApiError(405, 'MethodNotAllowed', `${verb} is not supported on resources of kind "${resource}"`, {
    kind: resource,
  });

export const pathNotFound = (): ApiError =>
  new ApiError(404, 'NotFound', 'the server could not find the requested resource');

export const gone = (message: string): ApiError => new ApiError(410, 'Expired', message);

/** The answer to a successful delete of a resource that does not return the deleted object (secrets). */
export function success(resource: string, name: string, uid: string): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, kind: resource, uid } };
}
