import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ERROR_STATUS, SandgateError, type ErrorCode, type Problem } from '@sandgate/contracts';
import { isRedisUnavailable } from '@sandgate/state';

const TITLES: Partial<Record<ErrorCode, string>> = {
  validation_failed: 'Request validation failed',
  invalid_json: 'Malformed JSON body',
  payload_too_large: 'Payload too large',
  unauthorized: 'Unauthorized',
  internal: 'Internal error',
};
const title = (code: ErrorCode) => TITLES[code] ?? code.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase());

export function problem(code: ErrorCode, detail: string, instance?: string, extra?: Partial<Problem>): Problem {
  return {
    type: `https://sandgate.dev/problems/${code.replace(/_/g, '-')}`,
    title: title(code),
    status: ERROR_STATUS[code],
    code,
    detail,
    ...(instance ? { instance } : {}),
    ...extra,
  };
}

export function sendProblem(reply: FastifyReply, p: Problem): FastifyReply {
  if (p.code === 'unauthorized') reply.header('www-authenticate', 'Bearer realm="sandgate"');
  // The client may still be sending a body we refused or stopped reading (a full disk): close the connection rather
  // than read it all, or leave the rest to be parsed as the next request.
  if (p.code === 'payload_too_large' || !reply.request.raw.complete) reply.header('connection', 'close');
  // Every 429 says when to retry (RFC 6585): where its limit named no time, a second.
  if (p.status === 429 && p.retry_after === undefined) p = { ...p, retry_after: 1 };
  if (p.retry_after !== undefined) reply.header('retry-after', p.retry_after);
  return reply.status(p.status).type('application/problem+json').send(p);
}

/** Fastify's own error codes that are the client's fault, mapped onto ours. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'bad_request',
  FST_REQ_FILE_TOO_LARGE: 'payload_too_large',
  FST_PARTS_LIMIT: 'payload_too_large',
  FST_FILES_LIMIT: 'payload_too_large',
  FST_FIELDS_LIMIT: 'payload_too_large',
  FST_INVALID_MULTIPART_CONTENT_TYPE: 'unsupported_media_type',
  FST_MP_PREMATURE_CLOSE: 'bad_request',
  FST_PROTO_VIOLATION: 'bad_request',
  FST_ERR_NOT_FOUND: 'not_found',
};

/** Turns any error into problem+json: ours by code, Fastify's by table, anything else a 500 without internals. */
export function toProblem(err: unknown, req: FastifyRequest): Problem {
  if (err instanceof SandgateError) return problem(err.code, err.message, req.url, err.extra as Partial<Problem>);
  if (isRedisUnavailable(err)) {
    // Redis reconnects within a second or two of coming back (ioredis retries every ≤ 2 s).
    const detail = 'Redis cannot be reached right now; retry shortly';
    return problem('redis_unavailable', detail, req.url, { retry_after: 1 });
  }
  if ((err as NodeJS.ErrnoException).code === 'EDQUOT') {
    const detail = "the session's files reached its disk quota (SANDGATE_SESSION_DISK_BYTES); delete some to make room";
    return problem('storage_quota_exceeded', detail, req.url);
  }
  if ((err as NodeJS.ErrnoException).code === 'ENOSPC') {
    return problem('insufficient_storage', 'the data directory is full; retry once space is freed', req.url);
  }
  const e = err as FastifyError & {
    validation?: { instancePath: string; message?: string; params?: Record<string, unknown> }[];
  };
  if (e.validation) {
    const errors = e.validation.map((v) => ({
      path: `${e.validationContext ?? 'body'}${v.instancePath || (v.params?.missingProperty ? `/${String(v.params.missingProperty)}` : '')}`,
      message: v.params?.additionalProperty
        ? `unknown property "${String(v.params.additionalProperty)}"`
        : (v.message ?? 'invalid'),
    }));
    return problem('validation_failed', errors.map((x) => `${x.path}: ${x.message}`).join('; '), req.url, { errors });
  }
  const mapped = e.code ? FASTIFY_CODES[e.code] : undefined;
  if (mapped) return problem(mapped, e.message, req.url);
  if (e instanceof SyntaxError && e.statusCode === 400) return problem('invalid_json', e.message, req.url);
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    const code =
      (Object.keys(ERROR_STATUS) as ErrorCode[]).find((c) => ERROR_STATUS[c] === e.statusCode) ?? 'bad_request';
    return problem(code, e.message, req.url);
  }
  // The client went away or stopped sending (a request past its deadline) before its body ended: its fault, not ours.
  if (req.raw.aborted || (req.raw.destroyed && !req.raw.complete)) {
    return problem('bad_request', 'the request ended before its body did', req.url);
  }
  return problem('internal', 'an internal error occurred; it has been logged', req.url);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function registerErrorHandling(app: FastifyInstance<any, any, any, any, any>): void {
  app.setErrorHandler((err, req, reply) => {
    const p = toProblem(err, req);
    if (p.code === 'redis_unavailable') {
      req.log.warn({ err: (err as Error).message }, 'request failed: Redis unavailable');
    } else if (p.status >= 500) req.log.error({ err }, 'request failed');
    else req.log.info({ code: p.code, detail: p.detail }, 'request rejected');
    return sendProblem(reply, p);
  });
  app.setNotFoundHandler((req, reply) =>
    sendProblem(reply, problem('not_found', `no route for ${req.method} ${req.url.split('?')[0]}`, req.url)),
  );
}

/**
 * What Node's HTTP parser refuses before any route sees it (a request past its deadline, oversized headers, bytes that
 * are no HTTP): answered as problem+json like everything else, then the connection is closed.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const code: ErrorCode =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? 'request_timeout'
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? 'headers_too_large'
        : 'bad_request';
  const detail =
    code === 'request_timeout'
      ? 'the request (headers and body) did not arrive in time'
      : code === 'headers_too_large'
        ? 'the request headers are too large'
        : 'the bytes sent are not a valid HTTP request';
  const body = JSON.stringify(problem(code, detail));
  if (socket.writable) {
    const status = ERROR_STATUS[code];
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/problem+json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
