export interface OriginPolicyOptions {
  /** SANDGATE_PUBLIC_URL: its origin is always allowed. */
  publicUrl: string;
  /** No API keys configured: any loopback origin is allowed too (a local tool's UI). */
  open: boolean;
  /** Further origins an operator allows. */
  extra?: readonly string[];
}

const LOOPBACK_HOSTS = new Set(['localhost', '[::1]']);
const isLoopbackOrigin = (url: URL) =>
  (url.protocol === 'http:' || url.protocol === 'https:') &&
  (LOOPBACK_HOSTS.has(url.hostname) || /^127(\.\d{1,3}){3}$/.test(url.hostname));

/** SANDGATE_ALLOWED_HOSTS as origins: each host (with its port, if it names one) over http and https. */
export const allowedOrigins = (hosts: readonly string[]) => hosts.flatMap((h) => [`http://${h}`, `https://${h}`]);

/**
 * The origins an operator trusts besides the public URL's: those of SANDGATE_ALLOWED_HOSTS and SANDGATE_CORS_ORIGINS.
 * The host check, /mcp's Origin check and CORS all read this one list, so a page CORS lets in is not refused by the
 * others.
 */
export const trustedOrigins = (config: { allowedHosts: readonly string[]; corsOrigins: readonly string[] }) => [
  ...allowedOrigins(config.allowedHosts),
  ...config.corsOrigins,
];

/**
 * Whether a request's `Origin` may be served: by /mcp always (the MCP specification requires an HTTP server to
 * validate it), by every route in open mode (plugins/host-check.ts), so that a web page cannot drive a local server
 * through DNS rebinding or a cross-site request. A request without one (not from a browser) passes; `null` and
 * anything unlisted do not.
 */
export function originPolicy({ publicUrl, open, extra = [] }: OriginPolicyOptions): (origin?: string) => boolean {
  const allowed = new Set([new URL(publicUrl).origin, ...extra.map((o) => new URL(o).origin)]);
  return (origin) => {
    if (origin === undefined) return true;
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false;
    }
    // The serialised origin, so `HTTP://Host:80` and `http://host` compare equal.
    return allowed.has(url.origin) || (open && isLoopbackOrigin(url));
  };
}
