import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { pipeline } from 'node:stream';
import { faultError, Faults, type RequestInfo } from './faults.ts';

/** One request as the proxy saw it, and what became of it (the API server's status, or a fault's). */
export interface ProxiedCall extends RequestInfo {
  query: Record<string, string>;
  /** The answer's status; -1 for a reset connection, -2 for a request left hanging. */
  status: number;
  /** Whether a fault answered instead of the API server. */
  faulted: boolean;
}

/** The real API server behind the proxy: its URL and the CA its certificate is signed by. */
export interface ProxyTarget {
  server: string;
  caData: string;
}

/**
 * What only a test can make a real API server do: an HTTP proxy on loopback in front of it that answers the
 * requests an armed fault matches (429 with Retry-After, 500, 503, a reset connection, no answer, a delay), and
 * passes every other request through untouched, the client's own token included, so the API server still
 * authenticates, authorizes, validates and answers it. Point a client at `kubeconfigFor(theirs)`.
 */
export class FaultProxy {
  readonly faults = new Faults();
  readonly calls: ProxiedCall[] = [];
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #target: ProxyTarget;
  url = '';

  private constructor(target: ProxyTarget) {
    this.#target = target;
    this.#server = createServer((req, res) => this.#handle(req, res));
    this.#server.on('connection', (s) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
  }

  static async start(target: ProxyTarget): Promise<FaultProxy> {
    const proxy = new FaultProxy(target);
    await new Promise<void>((resolve) => proxy.#server.listen(0, '127.0.0.1', resolve));
    proxy.url = `http://127.0.0.1:${(proxy.#server.address() as { port: number }).port}`;
    return proxy;
  }

  /**
   * The same kubeconfig (shape of KubeConfig.loadFromOptions) with its cluster's server replaced by the proxy: a
   * plain-http server, which client-node accepts only with skipTLSVerify.
   */
  kubeconfigFor<T extends { clusters: { name: string }[] }>(kubeconfig: T): T {
    return {
      ...kubeconfig,
      clusters: kubeconfig.clusters.map((c) => ({ name: c.name, server: this.url, skipTLSVerify: true })),
    };
  }

  /** The calls of one verb on one resource (`pods`, `pods/log`, …) so far. */
  count(verb: string, resource: string): number {
    return this.calls.filter(
      (c) => c.verb === verb && (c.subresource ? `${c.resource}/${c.subresource}` : c.resource) === resource,
    ).length;
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://proxy');
    const method = req.method ?? 'GET';
    const info = requestInfo(method, url.pathname, url.searchParams);
    const call: ProxiedCall = { ...info, query: Object.fromEntries(url.searchParams), status: 0, faulted: false };
    this.calls.push(call);
    const fault = this.faults.take(info);
    if (fault && 'reset' in fault) {
      Object.assign(call, { status: -1, faulted: true });
      req.socket.destroy();
      return;
    }
    if (fault && 'hang' in fault) {
      Object.assign(call, { status: -2, faulted: true });
      return;
    }
    if (fault && 'status' in fault) {
      const e = faultError(fault);
      const body = Buffer.from(JSON.stringify(e.toStatus()));
      Object.assign(call, { status: e.code, faulted: true });
      req.resume();
      res.writeHead(e.code, { 'content-type': 'application/json', 'content-length': body.length, ...e.headers });
      res.end(body);
      return;
    }
    const forward = () => {
      const target = new URL(req.url ?? '/', this.#target.server);
      const headers = { ...req.headers, host: target.host };
      const upstream = httpsRequest(
        target,
        { method, headers, ca: Buffer.from(this.#target.caData, 'base64') },
        (answer) => {
          call.status = answer.statusCode ?? 0;
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          pipeline(answer, res, () => {});
        },
      );
      upstream.on('error', () => res.destroy());
      pipeline(req, upstream, () => {});
    };
    if (fault && 'delayMs' in fault) {
      call.faulted = true;
      setTimeout(forward, fault.delayMs);
    } else {
      forward();
    }
  }
}

/** `/api/v1/[namespaces/{ns}/]{resource}[/{name}[/{subresource}]]` → the authorizer's view of the request. */
export function requestInfo(method: string, path: string, query: URLSearchParams): RequestInfo {
  const m = /^\/api\/v1(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+)(?:\/([^/]+))?)?\/?$/.exec(path);
  if (!m) return { method, path, verb: method.toLowerCase() };
  const [, namespace, resource, name, subresource] = m.map((p) =>
    p === undefined ? undefined : decodeURIComponent(p),
  );
  const watch = !['0', 'false', null].includes(query.get('watch')?.toLowerCase() ?? null);
  const verb =
    {
      GET: name ? 'get' : watch ? 'watch' : 'list',
      POST: 'create',
      PUT: 'update',
      PATCH: 'patch',
      DELETE: name ? 'delete' : 'deletecollection',
    }[method] ?? method.toLowerCase();
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
