import { request, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { SandgateError } from '@sandgate/contracts';
import type { SessionRecord } from '@sandgate/state';
import type { ServiceManager } from './service-manager.ts';

/**
 * Pages a service serves run in an opaque origin of their own: they cannot read what the gateway's origin keeps (the
 * dashboard's API key) nor call the API with its credentials. Scripts, forms and popups still work.
 */
const SANDBOX_CSP = 'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads';
/**
 * Response headers that act on the whole origin they come from, not on the one response: on the gateway's origin a
 * service must not send them, or a link to its page would act on the gateway (and its dashboard) for whoever opens it.
 */
const ORIGIN_WIDE = new Set([
  // Cookies for the gateway's host: read by every later request to it, and enough of them make each one too large.
  'set-cookie',
  'set-cookie2',
  // Wipes the origin's storage (the dashboard's key), cache, and cookies.
  'clear-site-data',
  // Widens what a service worker of the origin may control.
  'service-worker-allowed',
  // Pins the host (and its subdomains) to HTTPS for up to years, or lifts the operator's pin.
  'strict-transport-security',
  // Decides, for the first page of the origin a browser sees, how every later page of it is grouped.
  'origin-agent-cluster',
  // Sends the origin's later connections to another port or protocol.
  'alt-svc',
  // Network error logging: a policy for the origin, reporting its later requests (URLs included) to the service.
  'nel',
  'report-to',
  // Client hints the browser then sends on every later request to the origin.
  'accept-ch',
  'critical-ch',
  // A login prompt on the gateway's origin (the service never gets an Authorization header through it anyway).
  'www-authenticate',
  // State a browser keeps for the origin: login status (FedCM), storage access, topics observed.
  'set-login',
  'activate-storage-access',
  'observe-browsing-topics',
  // Key pinning and CT enforcement for the host (obsolete, still origin-wide where a browser reads them).
  'public-key-pins',
  'public-key-pins-report-only',
  'expect-ct',
]);
/** Headers of one hop only (RFC 9110 §7.6.1), never passed on; and the tenant's credentials. */
const HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'authorization',
  'host',
  // The gateway origin's cookies (another app on its host, the operator's): never the service's.
  'cookie',
]);

/** What a request to a service's proxy names: the session, the service, and the path the service gets. */
export interface ProxyTarget {
  session: SessionRecord;
  name: string;
  /** From the first '/' after the proxy prefix, with the query. */
  path: string;
  /** The public prefix the service is served under (X-Forwarded-Prefix). */
  prefix: string;
}

const PROXY_PATH = /^\/v1\/sessions\/(sess_[0-9a-f]{12})\/services\/([a-z][a-z0-9-]{0,31})\/proxy(\/[^]*)?$/;
const PREVIEW_PATH = /^\/preview\/([^/?]+)(\/[^]*)?$/;

/** Splits a raw URL into the proxy (or preview) prefix and the rest; undefined for any other URL. */
export function splitProxyUrl(
  url: string,
):
  | { kind: 'api'; sessionId: string; name: string; prefix: string; rest: string }
  | { kind: 'preview'; token: string; prefix: string; rest: string }
  | undefined {
  const q = url.indexOf('?');
  const pathname = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? '' : url.slice(q);
  let m = PROXY_PATH.exec(pathname);
  if (m) {
    const rest = (m[3] ?? '/') + query;
    return {
      kind: 'api',
      sessionId: m[1]!,
      name: m[2]!,
      prefix: pathname.slice(0, pathname.length - (m[3]?.length ?? 0)),
      rest,
    };
  }
  m = PREVIEW_PATH.exec(pathname);
  if (m) {
    const rest = (m[2] ?? '/') + query;
    return { kind: 'preview', token: m[1]!, prefix: `/preview/${m[1]!}`, rest };
  }
  return undefined;
}

/**
 * What a client says of the hops before it (`X-Forwarded-*`, `Forwarded`, `X-Real-IP`) is dropped: the gateway trusts
 * no proxy in front of it (its own rate limits count the socket's peer too), so the service is told what the gateway
 * saw itself.
 */
const CLIENT_FORWARDING = /^(forwarded|x-real-ip|x-forwarded-.*)$/;

/** The address of a socket's peer as X-Forwarded-For gives it: IPv4 without its IPv6-mapped prefix. */
const peerAddress = (raw: IncomingMessage): string => (raw.socket.remoteAddress ?? '').replace(/^::ffff:(?=\d)/, '');

function forwardHeaders(raw: IncomingMessage, prefix: string, port: number, secure: boolean): OutgoingHttpHeaders {
  const { headers } = raw;
  const out: OutgoingHttpHeaders = {};
  const named = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase()),
  );
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined && !HOP.has(k) && !named.has(k) && !CLIENT_FORWARDING.test(k)) out[k] = v;
  }
  out.host = `127.0.0.1:${port}`;
  out['x-forwarded-for'] = peerAddress(raw);
  out['x-forwarded-host'] = headers.host ?? '';
  out['x-forwarded-proto'] = secure ? 'https' : 'http';
  out['x-forwarded-prefix'] = prefix;
  return out;
}

/** Relays one HTTP request to the service over `upstream` and its response back; never throws once hijacked. */
export function proxyHttp(
  raw: IncomingMessage,
  res: import('node:http').ServerResponse,
  upstream: Socket,
  target: { path: string; prefix: string; port: number; secure: boolean },
): Promise<void> {
  return new Promise((resolve) => {
    const out = request(
      {
        method: raw.method,
        path: target.path,
        headers: forwardHeaders(raw, target.prefix, target.port, target.secure),
        // No agent: with one, Node would make its own connection instead of using this one.
        createConnection: () => upstream,
      },
      (answer) => {
        const headers: OutgoingHttpHeaders = {};
        for (const [k, v] of Object.entries(answer.headers)) {
          if (v !== undefined && !HOP.has(k) && !ORIGIN_WIDE.has(k) && k !== 'content-security-policy') headers[k] = v;
        }
        headers['content-security-policy'] = SANDBOX_CSP;
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, headers);
        answer.pipe(res);
        answer.once('end', () => resolve());
        answer.once('error', () => {
          res.destroy();
          resolve();
        });
      },
    );
    // The connection was paused once the agent's answer to our header was read: reading resumes with the response.
    out.once('socket', (socket) => socket.resume());
    out.once('error', (err) => {
      if (!res.headersSent) {
        const problem = {
          type: 'about:blank',
          title: 'Bad Gateway',
          status: 502,
          code: 'service_unreachable',
          detail: `the service did not answer: ${err.message}`,
        };
        res.writeHead(502, { 'content-type': 'application/problem+json' }).end(JSON.stringify(problem));
      } else {
        res.destroy();
      }
      upstream.destroy();
      resolve();
    });
    res.once('close', () => {
      if (!res.writableFinished) out.destroy();
    });
    raw.pipe(out);
  });
}

/**
 * Websockets (and any other upgrade) to a service: the request goes to the service as it came (minus the tenant's
 * credentials), and from then on the bytes flow both ways. Authorised like the HTTP proxy: an API key of the session's
 * tenant, or a preview link.
 */
export function serveUpgrades(
  app: FastifyInstance,
  resolve: (url: string, headers: IncomingHttpHeaders) => Promise<ProxyTarget | undefined>,
  services: ServiceManager,
): void {
  app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    void (async () => {
      const target = await resolve(req.url ?? '', req.headers);
      if (target === undefined) {
        refuse(socket, 404, 'not_found', 'no such service');
        return;
      }
      const { socket: upstream, port } = await services.connect(target.session, target.name);
      const headers = forwardHeaders(req, target.prefix, port, false);
      headers.connection = 'Upgrade';
      if (req.headers.upgrade) headers.upgrade = req.headers.upgrade;
      const lines = [`${req.method ?? 'GET'} ${target.path} HTTP/1.1`];
      for (const [k, v] of Object.entries(headers)) {
        for (const one of Array.isArray(v) ? v : [v]) {
          if (one !== undefined && !/[\r\n]/.test(String(one))) lines.push(`${k}: ${String(one)}`);
        }
      }
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      upstream.on('error', () => socket.destroy());
      socket.on('error', () => upstream.destroy());
      upstream.pipe(socket);
      socket.pipe(upstream);
    })().catch((err: unknown) => {
      const e = err instanceof SandgateError ? err : new SandgateError('internal', 'the upgrade failed');
      refuse(socket, e.status, e.code, e.message);
    });
  });
}

function refuse(socket: Duplex, status: number, code: string, detail: string): void {
  const body = JSON.stringify({ type: 'about:blank', title: code, status, code, detail });
  socket.end(
    `HTTP/1.1 ${status} ${code}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Connection: close\r\n\r\n${body}`,
  );
}
