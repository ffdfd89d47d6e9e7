import ipaddr from 'ipaddr.js';

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

const parseIp = (s: string) => ipaddr.process(s.replace(/^\[(.*)\]$/, '$1'));
const isIp = (s: string) => ipaddr.isValid(s.replace(/^\[(.*)\]$/, '$1'));

/**
 * Where callback_url may point: SANDGATE_WEBHOOK_ALLOW, comma-separated entries of
 *   - `hooks.example.com` or `hooks.example.com:8443`: that host (any port, or that one);
 *   - `*.example.com`: its sub-domains; `*`: any host name;
 *   - `10.1.2.3`, `10.0.0.0/8`, `::1`: those addresses, as URL hosts and as what a name resolves to.
 * A URL's host must be listed. Every address it resolves to must be public, or inside a listed address or range:
 * loopback, private, link-local and other special ranges are refused unless listed, and a name is checked after DNS
 * resolution (deliver.ts then connects to the very address it checked).
 */
export class WebhookAllowList {
  private readonly names: string[] = [];
  private readonly cidrs: Cidr[] = [];

  constructor(entries: readonly string[]) {
    for (const raw of entries.map((e) => e.trim().toLowerCase()).filter(Boolean)) {
      if (raw.includes('/') && ipaddr.isValidCIDR(raw)) this.cidrs.push(ipaddr.parseCIDR(raw));
      else if (isIp(raw)) {
        const ip = parseIp(raw);
        this.cidrs.push([ip, ip.kind() === 'ipv4' ? 32 : 128]);
      } else this.names.push(raw);
    }
  }

  get enabled(): boolean {
    return this.names.length > 0 || this.cidrs.length > 0;
  }

  /** Why `url` may not be a callback_url; null when it may. */
  refuseUrl(url: string): string | null {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return 'it is not a URL';
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'only http and https URLs are allowed';
    if (u.username || u.password) return 'credentials in the URL are not allowed';
    const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIp(host))
      return this.inRanges(host) || (this.names.includes('*') && isPublic(host)) ? null : `${host} is not allowed`;
    const port = u.port || (u.protocol === 'https:' ? '443' : '80');
    const ok = this.names.some(
      (n) => n === '*' || n === host || n === `${host}:${port}` || (n.startsWith('*.') && host.endsWith(n.slice(1))),
    );
    return ok ? null : `the host ${host} is not in SANDGATE_WEBHOOK_ALLOW`;
  }

  /** Why a resolved address may not be connected to; null when it may. */
  refuseAddress(address: string): string | null {
    if (this.inRanges(address) || isPublic(address)) return null;
    return `${address} is a ${parseIp(address).range()} address, not listed in SANDGATE_WEBHOOK_ALLOW`;
  }

  private inRanges(address: string): boolean {
    const ip = parseIp(address);
    return this.cidrs.some(([net, bits]) => ip.kind() === net.kind() && ip.match([net, bits] as never));
  }
}

/** A public (global unicast) address: not loopback, private, link-local, CGNAT, multicast, reserved, … */
export const isPublic = (address: string) => parseIp(address).range() === 'unicast';
