import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { SandgateError } from '@sandgate/contracts';
import { isLoopbackAddress, type Config } from '@sandgate/config';
import { originPolicy, trustedOrigins } from './origin-policy.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Answered whatever the Host: health probes address a replica by its IP. */
    anyHost?: boolean;
  }
}

const DEFAULT_PORT: Record<string, string> = { 'http:': '80', 'https:': '443' };

/** host[:port] as a URL authority → [lower-case name (IPv6 without brackets), port or ''], or null if malformed. */
function authority(raw: string): [string, string] | null {
  try {
    const u = new URL(`http://${raw}`);
    if (u.username || u.password || u.pathname !== '/' || u.search || u.hash) return null;
    return [u.hostname.replace(/^\[(.*)\]$/, '$1'), u.port];
  } catch {
    return null;
  }
}

/**
 * Which Host headers this gateway answers: loopback (any port), the public URL's host and port, the URL sandbox Pods
 * reach it at (SANDGATE_K8S_GATEWAY_URL), and SANDGATE_ALLOWED_HOSTS (`name` for any port, `name:port` for one).
 */
export function hostPolicy(
  config: Pick<Config, 'publicUrl' | 'allowedHosts'> & Partial<Pick<Config, 'k8sGatewayUrl'>>,
): (host: string) => boolean {
  const authorityOf = (url: URL) =>
    `${url.hostname.replace(/^\[(.*)\]$/, '$1')}:${url.port || DEFAULT_PORT[url.protocol]}`;
  const allowed = [
    authorityOf(new URL(config.publicUrl)),
    // Sandbox Pods reach the gateway for their files at this URL.
    ...(config.k8sGatewayUrl ? [authorityOf(new URL(config.k8sGatewayUrl))] : []),
    ...config.allowedHosts
      .map((h) => authority(h))
      .filter((a) => a !== null)
      .map(([name, port]) => (port ? `${name}:${port}` : name)),
  ];
  return (host) => {
    const a = authority(host);
    if (!a) return false;
    const [name, port] = a;
    if (name === 'localhost' || isLoopbackAddress(name)) return true;
    return allowed.includes(name) || allowed.includes(`${name}:${port || '80'}`);
  };
}

/**
 * Against DNS rebinding and cross-site requests: a web page the operator visits can point a name of its own at
 * 127.0.0.1 and reach an open gateway through the browser; its requests carry that name as Host and its own
 * Origin. Without API keys (open mode) this check is always on; with keys it is on once SANDGATE_ALLOWED_HOSTS is
 * set. A foreign Host → 421 host_not_allowed; a foreign Origin (or `null`) → 403 origin_not_allowed.
 */
export const hostCheckPlugin = fp(async (app: FastifyInstance, { config }: { config: Config }) => {
  const refusal = hostGuard(config);
  if (refusal === null) return;
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config.anyHost) return;
    const refused = refusal(req.headers);
    if (refused) throw refused;
  });
});

/**
 * The check of hostCheckPlugin: the error a request with these headers gets, or null when it may pass. Null itself
 * where the check is off. Websocket upgrades meet it as every request does (upgrades.ts).
 */
function hostGuard(config: Config): ((headers: IncomingHttpHeaders) => SandgateError | null) | null {
  const open = Object.keys(config.apiKeys).length === 0;
  if (!open && config.allowedHosts.length === 0) return null;
  const allowed = hostPolicy(config);
  const mayUse = originPolicy({ publicUrl: config.publicUrl, open, extra: trustedOrigins(config) });
  return (headers) => {
    const host = headers.host ?? '';
    if (!allowed(host)) {
      return new SandgateError(
        'host_not_allowed',
        `this gateway does not answer to the host "${host.slice(0, 100)}"; ` +
          'use its public URL, a loopback address, or a host listed in SANDGATE_ALLOWED_HOSTS',
      );
    }
    const origin = headers.origin;
    if (!mayUse(origin)) {
      return new SandgateError(
        'origin_not_allowed',
        `requests from the origin "${origin!.slice(0, 100)}" are not allowed`,
      );
    }
    return null;
  };
}
