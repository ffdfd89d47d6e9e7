import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';

/**
 * Pages a service serves run in an opaque origin of their own: they cannot read what the gateway's origin keeps (the
 * dashboard's API key) nor call the API with its credentials. Scripts, forms and popups still work.
 */
export const SANDBOX_CSP = 'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads';
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
/** Headers of one hop only (RFC 9110 §7.6.1), never passed on. */
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
  'host',
]);
/**
 * Credentials of the gateway's origin, never the service's: the tenant's API key, and the origin's cookies (another app
 * on its host, the operator's). On a preview's own origin they are the service's own, and pass.
 */
const GATEWAY_CREDENTIALS = new Set(['authorization', 'cookie']);

/**
 * What a client says of the hops before it (`X-Forwarded-*`, `Forwarded`, `X-Real-IP`) is dropped: the gateway trusts
 * no proxy in front of it (its own rate limits count the socket's peer too), so the service is told what the gateway
 * saw itself.
 */
const CLIENT_FORWARDING = /^(forwarded|x-real-ip|x-forwarded-.*)$/;

/** The address of a socket's peer as X-Forwarded-For gives it: IPv4 without its IPv6-mapped prefix. */
const peerAddress = (raw: IncomingMessage): string => (raw.socket.remoteAddress ?? '').replace(/^::ffff:(?=\d)/, '');

/** Where a proxied request goes and under what public prefix it came. */
export interface Hop {
  /** The service's port (its Host header). */
  port: number;
  /** The public prefix the service is served under (X-Forwarded-Prefix); '' at the root of its own origin. */
  prefix: string;
  /** Whether the client reached the gateway over TLS (X-Forwarded-Proto). */
  secure: boolean;
  /** Served on an origin of its own (a preview host, SANDGATE_PREVIEW_ORIGIN), not on the gateway's. */
  ownOrigin: boolean;
}

/** The headers a request to the service carries: the client's, less what is not the service's, and ours. */
export function requestHeaders(raw: IncomingMessage, { port, prefix, secure, ownOrigin }: Hop): OutgoingHttpHeaders {
  const { headers } = raw;
  const out: OutgoingHttpHeaders = {};
  const named = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase()),
  );
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || HOP.has(k) || named.has(k) || CLIENT_FORWARDING.test(k)) continue;
    if (!ownOrigin && GATEWAY_CREDENTIALS.has(k)) continue;
    out[k] = v;
  }
  out.host = `127.0.0.1:${port}`;
  out['x-forwarded-for'] = peerAddress(raw);
  out['x-forwarded-host'] = headers.host ?? '';
  out['x-forwarded-proto'] = secure ? 'https' : 'http';
  if (prefix !== '') out['x-forwarded-prefix'] = prefix;
  return out;
}

/**
 * The headers the client gets of a service's response. On the gateway's origin: the service's, less what is one hop's
 * or acts on the origin, with the sandbox CSP in place of the service's own. On an origin of its own: the service's,
 * less what is one hop's, its cookies kept to that host (the hosts of all previews share their parent domain).
 */
export function responseHeaders(answer: IncomingMessage, { ownOrigin }: Pick<Hop, 'ownOrigin'>): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(answer.headers)) {
    if (v === undefined || HOP.has(k)) continue;
    if (ownOrigin) headers[k] = k === 'set-cookie' ? (v as string[]).map(hostOnly) : v;
    else if (!ORIGIN_WIDE.has(k) && k !== 'content-security-policy') headers[k] = v;
  }
  if (!ownOrigin) headers['content-security-policy'] = SANDBOX_CSP;
  return headers;
}

/** A Set-Cookie without its Domain attribute: the cookie goes back to the host that set it, no other. */
const hostOnly = (cookie: string): string =>
  cookie
    .split(';')
    .filter((part, i) => i === 0 || !/^\s*domain\s*=/i.test(part))
    .join(';');
