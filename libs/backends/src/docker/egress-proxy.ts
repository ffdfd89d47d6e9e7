import { chmod, mkdir, rm, stat } from 'node:fs/promises';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { pinnedLookup, type HostAllowList } from '@sandgate/config';
import { RequestError, Server as ProxyServer, type PrepareRequestFunctionOpts } from 'proxy-chain';
import type { BackendLogger } from '../shared/logger.ts';

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

/** Where a session sandbox finds the proxy: a directory holding its socket, mounted read-only. */
export const EGRESS_MOUNT = '/run/sandgate/egress';
export const EGRESS_SOCKET = `${EGRESS_MOUNT}/proxy.sock`;
/** A tunnel nothing moves through for this long is closed. */
const IDLE_MS = 120_000;

interface Listener {
  server: NetServer;
  /** The socket file's inode: another worker that listens on the same path afterwards has made a new one. */
  ino: number;
  tenant: string;
  sockets: Set<Socket>;
}

/** Stops accepting on a session's socket and cuts every connection that came by it. */
function stop(listener: Listener): void {
  listener.server.close();
  for (const s of listener.sockets) s.destroy();
}

/**
 * The egress proxy of one worker's session sandboxes. A session with egress has a Unix socket of its own, in a
 * directory mounted into its sandbox only; the sandbox itself has no network interface but loopback, where its agent
 * relays 127.0.0.1:3128 to that socket. So which session asks is known from the socket it came by, never from
 * anything the sandbox says, and nothing but the proxy is reachable: no bridge, no host port.
 *
 * Each request (HTTP, or a CONNECT tunnel for HTTPS) is checked against the tenant's allow-list; names are resolved
 * once and every address checked (HostAllowList), and the connection goes to that very address.
 */
export class EgressProxy {
  readonly #dir: string;
  readonly #settings: EgressSettings;
  readonly #log: BackendLogger;
  readonly #proxy: ProxyServer;
  readonly #listeners = new Map<string, Listener>();
  readonly #sessionOf = new WeakMap<Socket, string>();

  constructor(dir: string, settings: EgressSettings, log: BackendLogger) {
    this.#dir = dir;
    this.#settings = settings;
    this.#log = log;
    // Never listens itself: the sessions' sockets hand it their connections.
    this.#proxy = new ProxyServer({ port: 0, prepareRequestFunction: (o) => this.#check(o) });
    settings.onPrivate((sessionId) => {
      if (this.#listeners.has(sessionId)) this.#log.info({ sessionId }, 'session became private: egress cut');
      void this.close(sessionId);
    });
  }

  /** The host directory a session's sandbox mounts at EGRESS_MOUNT. */
  dirOf(sessionId: string): string {
    return join(this.#dir, sessionId);
  }

  /** Serves the session's socket from this worker, unless it does already; a private session gets none. */
  async open(sessionId: string, tenant: string): Promise<boolean> {
    if (await this.#settings.isPrivate(sessionId)) {
      await this.close(sessionId);
      return false;
    }
    const path = join(this.dirOf(sessionId), 'proxy.sock');
    const mine = this.#listeners.get(sessionId);
    if (
      mine !== undefined &&
      (await stat(path).then(
        (s) => s.ino,
        () => -1,
      )) === mine.ino
    )
      return true;
    if (mine !== undefined) stop(mine);
    await mkdir(this.dirOf(sessionId), { recursive: true, mode: 0o755 });
    await rm(path, { force: true });
    const listener: Listener = {
      server: createServer((s) => this.#accept(sessionId, listener, s)),
      ino: 0,
      tenant,
      sockets: new Set(),
    };
    await new Promise<void>((resolve, reject) => {
      listener.server.once('error', reject);
      listener.server.listen(path, () => resolve());
    });
    // The sandbox user connects; nobody else sees the directory.
    await chmod(path, 0o666);
    listener.ino = (await stat(path)).ino;
    this.#listeners.set(sessionId, listener);
    return true;
  }

  /** Stops serving a session: its socket goes, and every connection it has open is cut. */
  async close(sessionId: string): Promise<void> {
    const listener = this.#listeners.get(sessionId);
    this.#listeners.delete(sessionId);
    if (listener !== undefined) stop(listener);
    await rm(this.dirOf(sessionId), { recursive: true, force: true });
  }

  /** Closes what serves sessions that are gone. */
  async retain(live: ReadonlySet<string>): Promise<void> {
    await Promise.all([...this.#listeners.keys()].filter((id) => !live.has(id)).map((id) => this.close(id)));
  }

  async shutdown(): Promise<void> {
    for (const listener of this.#listeners.values()) stop(listener);
    this.#listeners.clear();
    // The proxy server itself never listened: only its connections are to end.
    this.#proxy.closeConnections();
    await this.#settings.close?.();
  }

  #accept(sessionId: string, listener: Listener, socket: Socket): void {
    if (listener.sockets.size >= this.#settings.maxConnections) {
      socket.end(
        'HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n' +
          `sandgate: this session already holds ${this.#settings.maxConnections} connections through the ` +
          'egress proxy (SANDGATE_EGRESS_MAX_CONNECTIONS)\n',
      );
      return;
    }
    listener.sockets.add(socket);
    socket.once('close', () => listener.sockets.delete(socket));
    socket.setTimeout(IDLE_MS);
    this.#sessionOf.set(socket, sessionId);
    // proxy-chain drops a connection without a peer address, which a Unix socket has not: name the session instead.
    Object.defineProperty(socket, 'remoteAddress', { value: `session:${sessionId}` });
    this.#proxy.server.emit('connection', socket);
  }

  async #check({ request, hostname, port }: PrepareRequestFunctionOpts) {
    const sessionId = this.#sessionOf.get(request.socket as Socket);
    const listener = sessionId === undefined ? undefined : this.#listeners.get(sessionId);
    if (sessionId === undefined || listener === undefined) throw new RequestError('sandgate: no egress here', 403);
    if (await this.#settings.isPrivate(sessionId)) {
      void this.close(sessionId);
      throw new RequestError('sandgate: this session holds private data and has no network', 403);
    }
    const allow = this.#settings.allowListOf(listener.tenant);
    const refused = allow.refuseHost(hostname, port);
    const pinned = refused === null ? await allow.resolve(hostname, port) : { error: refused, permanent: true };
    if ('error' in pinned) {
      this.#log.info({ sessionId, host: hostname, port, reason: pinned.error }, 'egress refused');
      throw new RequestError(`sandgate: egress to ${hostname}:${port} refused: ${pinned.error}\n`, 403);
    }
    return { dnsLookup: pinnedLookup(pinned) };
  }
}
