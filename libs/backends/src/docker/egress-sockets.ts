import { chmod, mkdir, rm, stat } from 'node:fs/promises';
import { createServer, type Server as NetServer } from 'node:net';
import { join } from 'node:path';
import type { EgressProxy } from '../network/egress-proxy.ts';

/** Where a session sandbox finds the proxy: a directory holding its socket, mounted read-only. */
export const EGRESS_MOUNT = '/run/sandgate/egress';
export const EGRESS_SOCKET = `${EGRESS_MOUNT}/proxy.sock`;

interface Listener {
  server: NetServer;
  /** The socket file's inode: another worker that listens on the same path afterwards has made a new one. */
  ino: number;
}

/**
 * The way out of Docker session sandboxes: a session with egress has a Unix socket of its own, in a directory
 * mounted into its sandbox only; the sandbox has no network interface but loopback, where its agent relays
 * 127.0.0.1:3128 to that socket. So which session asks is known from the socket it came by, and nothing but the proxy
 * is reachable: no bridge, no host port.
 */
export class EgressSockets {
  readonly #dir: string;
  readonly #listeners = new Map<string, Listener>();

  constructor(
    dir: string,
    readonly proxy: EgressProxy,
  ) {
    this.#dir = dir;
    proxy.onCut((sessionId) => void this.close(sessionId));
  }

  /** The host directory a session's sandbox mounts at EGRESS_MOUNT. */
  dirOf(sessionId: string): string {
    return join(this.#dir, sessionId);
  }

  /** Serves the session's socket from this worker, unless it does already; a private session gets none. */
  async open(sessionId: string, tenant: string): Promise<boolean> {
    if (await this.proxy.settings.isPrivate(sessionId)) {
      this.proxy.cut(sessionId);
      return false;
    }
    const path = join(this.dirOf(sessionId), 'proxy.sock');
    const mine = this.#listeners.get(sessionId);
    const ino = await stat(path).then(
      (s) => s.ino,
      () => -1,
    );
    if (mine !== undefined && ino === mine.ino) return true;
    mine?.server.close();
    await mkdir(this.dirOf(sessionId), { recursive: true, mode: 0o755 });
    await rm(path, { force: true });
    const listener: Listener = {
      server: createServer((s) => this.proxy.serve(sessionId, tenant, s)),
      ino: 0,
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

  /** Stops serving a session: its socket goes (the proxy cuts its connections: EgressProxy.cut). */
  async close(sessionId: string): Promise<void> {
    const listener = this.#listeners.get(sessionId);
    this.#listeners.delete(sessionId);
    listener?.server.close();
    await rm(this.dirOf(sessionId), { recursive: true, force: true });
  }

  shutdown(): void {
    for (const listener of this.#listeners.values()) listener.server.close();
    this.#listeners.clear();
  }
}
