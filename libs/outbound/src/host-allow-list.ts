import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

export interface PinnedAddress {
  address: string;
  family: number;
}

/** A `lookup` for node:http and node:net that answers `pinned` whatever the name: the address already checked. */
export const pinnedLookup = (pinned: PinnedAddress) =>
  ((_host: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) =>
    opts.all ? cb(null, [pinned]) : cb(null, pinned.address, pinned.family)) as never;

/** An address range, at one port only or at any. */
interface Cidr {
  range: [ipaddr.IPv4 | ipaddr.IPv6, number];
  port: number | undefined;
}

const parseIp = (s: string) => ipaddr.process(s.replace(/^\[(.*)\]$/, '$1'));
const isIp = (s: string) => ipaddr.isValid(s.replace(/^\[(.*)\]$/, '$1'));

/**
 * Where the platform may connect on someone's behalf: callback URLs (SANDGATE_WEBHOOK_ALLOW) and sandboxes' egress
 * (SANDGATE_EGRESS). Entries:
 *   - `hooks.example.com` or `hooks.example.com:8443`: that host (any port, or that one);
 *   - `*.example.com`: its sub-domains; `*`: any host name;
 *   - `10.1.2.3`, `10.0.0.0/8`, `::1`: those addresses, as URL hosts and as what a name resolves to;
 *   - `10.1.2.3:5432`, `[::1]:8080`: that address at that port only.
 * A host must be listed. Every address it resolves to must be public, or inside a listed address or range:
 * loopback, private, link-local and other special ranges are refused unless listed, and a name is checked after DNS
 * resolution (the caller then connects to the very address it checked).
 */
export class HostAllowList {
  readonly #names: string[] = [];
  readonly #cidrs: Cidr[] = [];

  /** `listName` names the list in refusals, so that whoever reads one knows what to change. */
  readonly #listName: string;
  constructor(entries: readonly string[], listName: string) {
    this.#listName = listName;
    for (const raw of entries.map((e) => e.trim().toLowerCase()).filter(Boolean)) {
      const withPort = /^(\d+\.\d+\.\d+\.\d+|\[[0-9a-f:.]+\]):(\d{1,5})$/.exec(raw);
      const address = withPort?.[1] ?? raw;
      const port = withPort ? Number(withPort[2]) : undefined;
      if (address.includes('/') && ipaddr.isValidCIDR(address)) {
        this.#cidrs.push({ range: ipaddr.parseCIDR(address), port });
      } else if (isIp(address)) {
        const ip = parseIp(address);
        this.#cidrs.push({ range: [ip, ip.kind() === 'ipv4' ? 32 : 128], port });
      } else this.#names.push(raw);
    }
  }

  get enabled(): boolean {
    return this.#names.length > 0 || this.#cidrs.length > 0;
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
    return this.refuseHost(u.hostname, Number(u.port || (u.protocol === 'https:' ? '443' : '80')));
  }

  /** Why `host` (a name or an address) at `port` may not be connected to; null when it may. */
  refuseHost(hostname: string, port: number): string | null {
    const host = hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1');
    if (isIp(host)) {
      if (this.#inRanges(host, port) || (this.#names.includes('*') && isPublic(host))) return null;
      return `${host} at port ${port} is not in ${this.#listName}`;
    }
    const ok = this.#names.some(
      (n) => n === '*' || n === host || n === `${host}:${port}` || (n.startsWith('*.') && host.endsWith(n.slice(1))),
    );
    return ok ? null : `the host ${host} is not in ${this.#listName}`;
  }

  /** Why a resolved address may not be connected to (at `port`); null when it may. */
  refuseAddress(address: string, port?: number): string | null {
    if (this.#inRanges(address, port) || isPublic(address)) return null;
    return `${address} is a ${parseIp(address).range()} address, not listed in ${this.#listName}`;
  }

  /**
   * The one address to connect to for `hostname`: resolved once and every answer checked, so that a name whose DNS
   * answer changes between check and connect (rebinding) still reaches only the address checked.
   */
  async resolve(hostname: string, port: number): Promise<PinnedAddress | { error: string; permanent: boolean }> {
    const host = hostname.replace(/^\[(.*)\]$/, '$1');
    let addresses: PinnedAddress[];
    try {
      addresses = isIP(host)
        ? [{ address: host, family: isIP(host) }]
        : await lookup(host, { all: true, verbatim: true });
    } catch (err) {
      return { error: `cannot resolve ${host}: ${(err as Error).message}`, permanent: false };
    }
    const refused = addresses.map((a) => this.refuseAddress(a.address, port)).find((r) => r !== null);
    if (refused || addresses.length === 0) return { error: `not allowed: ${refused ?? 'no address'}`, permanent: true };
    return addresses[0]!;
  }

  #inRanges(address: string, port: number | undefined): boolean {
    const ip = parseIp(address);
    return this.#cidrs.some(
      ({ range: [net, bits], port: only }) =>
        (only === undefined || only === port) && ip.kind() === net.kind() && ip.match([net, bits] as never),
    );
  }
}

/** A public (global unicast) address: not loopback, private, link-local, CGNAT, multicast, reserved, … */
export const isPublic = (address: string) => parseIp(address).range() === 'unicast';
