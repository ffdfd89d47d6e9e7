import { request, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { SessionRecord } from '@sandgate/state';
import { problem } from './plugins/errors.ts';
import { requestHeaders, responseHeaders, type Hop } from './proxy-headers.ts';
import type { Upgrade } from './upgrades.ts';

/** What a request to a service's proxy names: the session, the service, and the path the service gets. */
export interface ProxyTarget {
  session: SessionRecord;
  name: string;
  /** From the first '/' after the proxy prefix, with the query. */
  path: string;
  /** The public prefix the service is served under (X-Forwarded-Prefix); '' at the root of its own origin. */
  prefix: string;
  /** Reached on a preview's own origin (SANDGATE_PREVIEW_ORIGIN), not the gateway's. */
  ownOrigin: boolean;
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

/** Where a proxied request goes: the path the service gets, and the hop (port, prefix, TLS). */
export interface ProxyTo extends Hop {
  path: string;
}

/** Relays one HTTP request to the service over `upstream` and its response back; never throws once hijacked. */
export function proxyHttp(raw: IncomingMessage, res: ServerResponse, upstream: Socket, to: ProxyTo): Promise<void> {
  return new Promise((resolve) => {
    const out = request(
      // No agent: with one, Node would make its own connection instead of using this one.
      { method: raw.method, path: to.path, headers: requestHeaders(raw, to), createConnection: () => upstream },
      (answer) => relay(answer, res, to, resolve),
    );
    relayFailure(out, res, upstream, resolve);
    res.once('close', () => {
      if (!res.writableFinished) out.destroy();
    });
    raw.pipe(out);
  });
}

/**
 * A websocket (or another upgrade) to the service over `upstream`. A 101 from the service is relayed (its headers as
 * responseHeaders keeps them), then the bytes flow both ways; any other answer is relayed as an HTTP response is (on
 * the gateway's origin: the sandbox CSP, nothing that acts on the origin), and the connection closes after it.
 */
export function proxyUpgrade(
  raw: IncomingMessage,
  res: ServerResponse,
  upgrade: Upgrade,
  upstream: Socket,
  to: ProxyTo,
): Promise<void> {
  return new Promise((resolve) => {
    const headers = { ...requestHeaders(raw, to), connection: 'Upgrade', upgrade: raw.headers.upgrade ?? 'websocket' };
    const out = request({ method: 'GET', path: to.path, headers, createConnection: () => upstream });
    out.once('upgrade', (answer, tunnel: Socket, head: Buffer) => {
      const { 'content-security-policy': _, ...mine } = responseHeaders(answer, to);
      upgrade.tunnelled = true;
      // Written through the response, so that the request log and metrics see its 101.
      res.writeHead(101, { ...mine, connection: 'Upgrade', upgrade: answer.headers.upgrade ?? '' }).end();
      const { socket } = upgrade;
      if (head.length > 0) socket.write(head);
      if (upgrade.head.length > 0) tunnel.write(upgrade.head);
      tunnel.once('error', () => socket.destroy()).once('close', () => socket.destroy());
      socket.once('error', () => tunnel.destroy()).once('close', () => tunnel.destroy());
      tunnel.pipe(socket).pipe(tunnel);
      resolve();
    });
    out.once('response', (answer) => relay(answer, res, to, resolve));
    relayFailure(out, res, upstream, resolve);
    upgrade.socket.once('close', () => {
      if (!upgrade.tunnelled) out.destroy();
    });
    out.end();
  });
}

/** Sends a service's response on to the client. */
function relay(answer: IncomingMessage, res: ServerResponse, to: ProxyTo, done: () => void): void {
  res.writeHead(answer.statusCode ?? 502, answer.statusMessage, responseHeaders(answer, to));
  answer.pipe(res);
  answer.once('end', done);
  answer.once('error', () => {
    res.destroy();
    done();
  });
}

/** A request to the service that fails: 502 service_unreachable if nothing was sent yet, else the response ends. */
function relayFailure(out: ClientRequest, res: ServerResponse, upstream: Socket, done: () => void): void {
  // The connection was paused once the agent's answer to our header was read: reading resumes with the response.
  out.once('socket', (socket) => socket.resume());
  out.once('error', (err) => {
    if (!res.headersSent) {
      const body = problem('service_unreachable', `the service did not answer: ${err.message}`);
      res.writeHead(502, { 'content-type': 'application/problem+json' }).end(JSON.stringify(body));
    } else {
      res.destroy();
    }
    upstream.destroy();
    done();
  });
}
