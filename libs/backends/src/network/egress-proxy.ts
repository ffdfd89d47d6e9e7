import type { Socket } from 'node:net';
import { pinnedLookup, type HostAllowList } from '@sandgate/outbound';
import { RequestError, Server as ProxyServer, type PrepareRequestFunctionOpts } from 'proxy-chain';
import type { BackendLogger } from '../logger.ts';

/** What decides a session's egress; see docs/network.md. */
export interface EgressSettings {
  /** The hosts a tenant's sessions may reach (SANDGATE_EGRESS); an empty list: no egress. */
  allowListOf(tenant: string): HostAllowList;
  /** Whether the session holds private data: then it never reaches the network again. */
  isPrivate(sessionId: string): Promise<boolean>;
  /** Calls `listener` with every session that becomes private, as it does. */
  onPrivate(listener: (sessionId: string) => void): void;
  /** Connections one session may hold open through the proxy at once. */
  maxConnections: number;
  /** Releases what the settings hold (their Redis connections), when the backend closes. */
  close?(): Promise<void>;
}

/** A tunnel nothing moves through for this long is closed. */
const IDLE_MS = 120_000;

/** A session this worker carries egress for: its tenant, and the connections it has open through the proxy. */
interface Served {
  tenant: string;
  sockets: Set<Socket>;
}

/**
 * One worker's egress proxy (proxy-chain, never listening on a port). Each connection is handed to it with the
 * session it came from, known from the path it came by — a Unix socket mounted into that session's sandbox only
 * (Docker, docker/egress-sockets.ts), or a connection the worker itself opened to that session's Pod
 * (Kubernetes, kubernetes/egress-links.ts) — never from anything the sandbox says.
 *
 * Each request (HTTP, or a CONNECT tunnel for HTTPS) is checked against the tenant's allow-list; names are resolved
 * once and every address checked (HostAllowList), and the connection goes to that very address. A session that
 * becomes private has its connections cut at once, and gets no new ones.
 */
export class EgressProxy {
  readonly settings: EgressSettings;
  readonly #log: BackendLogger;
  readonly #proxy: ProxyServer;
  readonly #served = new Map<string, Served>();
  readonly #sessionOf = new WeakMap<Socket, string>();
  readonly #cutListeners: ((sessionId: string) => void)[] = [];

  constructor(settings: EgressSettings, log: BackendLogger) {
    this.settings = settings;
    this.#log = log;
    this.#proxy = new ProxyServer({ port: 0, prepareRequestFunction: (o) => this.#check(o) });
    settings.onPrivate((sessionId) => {
      if (this.#served.has(sessionId)) this.#log.info({ sessionId }, 'session became private: egress cut');
      this.cut(sessionId);
    });
  }

  /** Calls `listener` whenever a session's egress is cut (it became private, or is gone). */
  onCut(listener: (sessionId: string) => void): void {
    this.#cutListeners.push(listener);
  }

  /** Connections the session has open through the proxy. */
  connections(sessionId: string): number {
    return this.#served.get(sessionId)?.sockets.size ?? 0;
  }

  /** Proxies one connection of the session's sandbox. Beyond the session's bound it is answered 429 and closed. */
  serve(sessionId: string, tenant: string, socket: Socket): void {
    const served = this.#served.get(sessionId) ?? { tenant, sockets: new Set<Socket>() };
    this.#served.set(sessionId, served);
    served.tenant = tenant;
    if (served.sockets.size >= this.settings.maxConnections) {
      socket.end(
        'HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n' +
          `sandgate: this session already holds ${this.settings.maxConnections} connections through the ` +
          'egress proxy (SANDGATE_EGRESS_MAX_CONNECTIONS)\n',
      );
      return;
    }
    served.sockets.add(socket);
    socket.once('close', () => served.sockets.delete(socket));
    socket.setTimeout(IDLE_MS);
    this.#sessionOf.set(socket, sessionId);
    // proxy-chain drops a connection without a peer address, which a Unix socket has not: name the session instead.
    Object.defineProperty(socket, 'remoteAddress', { value: `session:${sessionId}`, configurable: true });
    this.#proxy.server.emit('connection', socket);
  }

  /** Cuts every connection of the session; the ways in stop serving it too (onCut). */
  cut(sessionId: string): void {
    const served = this.#served.get(sessionId);
    this.#served.delete(sessionId);
    for (const s of served?.sockets ?? []) s.destroy();
    for (const listener of this.#cutListeners) listener(sessionId);
  }

  /** Cuts what serves sessions that are gone. */
  retain(live: ReadonlySet<string>): void {
    for (const id of [...this.#served.keys()]) if (!live.has(id)) this.cut(id);
  }

  async shutdown(): Promise<void> {
    for (const id of [...this.#served.keys()]) this.cut(id);
    // The proxy server itself never listened: only its connections are to end.
    this.#proxy.closeConnections();
    await this.settings.close?.();
  }

  async #check({ request, hostname, port }: PrepareRequestFunctionOpts) {
    const sessionId = this.#sessionOf.get(request.socket as Socket);
    const served = sessionId === undefined ? undefined : this.#served.get(sessionId);
    if (sessionId === undefined || served === undefined) throw new RequestError('sandgate: no egress here', 403);
    if (await this.settings.isPrivate(sessionId)) {
      this.cut(sessionId);
      throw new RequestError('sandgate: this session holds private data and has no network', 403);
    }
    const allow = this.settings.allowListOf(served.tenant);
    const refused = allow.refuseHost(hostname, port);
    const pinned = refused === null ? await allow.resolve(hostname, port) : { error: refused, permanent: true };
    if ('error' in pinned) {
      this.#log.info({ sessionId, host: hostname, port, reason: pinned.error }, 'egress refused');
      throw new RequestError(`sandgate: egress to ${hostname}:${port} refused: ${pinned.error}\n`, 403);
    }
    return { dnsLookup: pinnedLookup(pinned) };
  }
}
