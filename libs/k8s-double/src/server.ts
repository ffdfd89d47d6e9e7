import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { pipeline, type Readable } from 'node:stream';
import { rbacDenied, rulesAllow, type PolicyRule } from './admission.ts';
import type { ApiAnswer, ApiContext, ApiRequest } from './api-context.ts';
import { faultError, type Faults, type RequestInfo } from './faults.ts';
import { queryFlag } from './objects.ts';
import type { OpenStreams } from './open-streams.ts';
import { podsApi } from './pods-api.ts';
import { eventsApi, secretsApi } from './secrets-api.ts';
import { ApiError, badRequest, pathNotFound, unauthorized } from './status.ts';

/** One request as the double saw it: what a test asserts the verbs of a backend with. */
export interface ApiCall extends RequestInfo {
  query: Record<string, string>;
  status: number;
  at: number;
}

export interface ServerOptions {
  token: string;
  /** When set, requests are authorised against these Role rules as `user`, as the RBAC authorizer would. */
  rbac?: { user: string; rules: PolicyRule[] };
  faults: Faults;
  calls: ApiCall[];
  streams: OpenStreams;
}

/** The API server's request limit (3 MiB): a larger body is a 413. */
const MAX_BODY = 3 * 1024 * 1024;
const HANDLERS: Record<string, (ctx: ApiContext, req: ApiRequest) => Promise<ApiAnswer>> = {
  pods: podsApi,
  secrets: secretsApi,
  events: eventsApi,
};

/** `/api/v1/[namespaces/{ns}/]{resource}[/{name}[/{subresource}]]` → the authorizer's view of the request. */
export function requestInfo(method: string, path: string, query: URLSearchParams): RequestInfo | undefined {
  const m = /^\/api\/v1(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+)(?:\/([^/]+))?)?\/?$/.exec(path);
  if (!m) return undefined;
  const [, namespace, resource, name, subresource] = m.map((p) =>
    p === undefined ? undefined : decodeURIComponent(p),
  );
  const verb =
    {
      GET: name ? 'get' : queryFlag(query, 'watch') ? 'watch' : 'list',
      POST: 'create',
      PUT: 'update',
      PATCH: 'patch',
      DELETE: name ? 'delete' : 'deletecollection',
    }[method] ?? method.toLowerCase();
  // exec/attach/portforward are authorised as `create` on a POST (and as `get` on a websocket GET before 1.35).
  return {
    method,
    path,
    verb,
    ...(resource ? { resource } : {}),
    ...(namespace ? { namespace } : {}),
    ...(name ? { name } : {}),
    ...(subresource ? { subresource } : {}),
  };
}

/** The HTTP front of the double: bearer auth, RBAC, armed faults, call recording, then the resource handlers. */
export function createApiServer(ctx: ApiContext, opts: ServerOptions): { server: Server; sockets: Set<Socket> } {
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => void handle(ctx, opts, req, res));
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return { server, sockets };
}

async function handle(ctx: ApiContext, opts: ServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://double');
  const method = req.method ?? 'GET';
  const info = requestInfo(method, url.pathname, url.searchParams) ?? {
    method,
    path: url.pathname,
    verb: method.toLowerCase(),
  };
  const call: ApiCall = { ...info, query: Object.fromEntries(url.searchParams), status: 0, at: Date.now() };
  opts.calls.push(call);
  const answer = (a: ApiAnswer, headers: Record<string, string> = {}) => {
    call.status = a.status;
    if (a.stream) return stream(res, a.status, a.contentType ?? 'application/json', a.stream, opts.streams);
    const text = Buffer.isBuffer(a.body) ? a.body : Buffer.from(JSON.stringify(a.body));
    res.writeHead(a.status, {
      'content-type': a.contentType ?? 'application/json',
      'content-length': text.length,
      ...headers,
    });
    res.end(text);
  };
  try {
    if (req.headers.authorization !== `Bearer ${opts.token}`) throw unauthorized();
    const fault = opts.faults.take(info);
    if (fault && 'reset' in fault) {
      call.status = -1;
      req.socket.destroy();
      return;
    }
    if (fault && 'hang' in fault) {
      call.status = -2;
      return;
    }
    if (fault && 'delayMs' in fault) await new Promise((r) => setTimeout(r, fault.delayMs));
    if (fault && 'status' in fault) throw faultError(fault);
    const body = await readBody(req);
    answer(await route(ctx, opts, info, url.searchParams, body));
  } catch (err) {
    const e =
      err instanceof ApiError
        ? err
        : new ApiError(500, 'InternalError', `k8s-double: ${(err as Error).message ?? String(err)}`);
    answer({ status: e.code, body: e.toStatus() }, e.headers);
  }
}

/**
 * A streamed answer: headers at once (a watch client waits for them before any event), then chunked writes as the
 * source produces them. The client going away destroys the source, which frees what feeds it.
 */
function stream(res: ServerResponse, status: number, contentType: string, body: Readable, open: OpenStreams): void {
  open.add(body);
  res.writeHead(status, { 'content-type': contentType });
  res.flushHeaders();
  pipeline(body, res, () => {});
}

async function route(
  ctx: ApiContext,
  opts: ServerOptions,
  info: RequestInfo,
  query: URLSearchParams,
  body: unknown,
): Promise<ApiAnswer> {
  if (info.path === '/version' && info.method === 'GET') {
    return {
      status: 200,
      body: { major: '1', minor: '34', gitVersion: 'v1.34.0-k8s-double', platform: 'linux/amd64' },
    };
  }
  const handler = info.resource === undefined ? undefined : HANDLERS[info.resource];
  if (!handler) throw pathNotFound();
  const authz = { ...info, resource: info.resource! };
  if (opts.rbac && !rulesAllow(opts.rbac.rules, authz)) throw rbacDenied(opts.rbac.user, authz);
  return handler(ctx, {
    method: info.method,
    query,
    body,
    ...(info.namespace ? { namespace: info.namespace } : {}),
    ...(info.name ? { name: info.name } : {}),
    ...(info.subresource ? { subresource: info.subresource } : {}),
  });
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY)
      throw new ApiError(413, 'RequestEntityTooLarge', `Request entity too large: limit is ${MAX_BODY}`);
    chunks.push(chunk);
  }
  if (size === 0) return undefined;
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw badRequest(`couldn't get version/kind; json parse error: ${(err as Error).message}`);
  }
}
