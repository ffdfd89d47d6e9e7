import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on loopback in front of the gateway, so a test can cut every open connection at once,
 * as a network drop would, while the gateway and the run carry on.
 */
export class DropProxy {
  readonly #server: Server;
  readonly #open = new Set<Socket>();
  /** Connections accepted so far. */
  accepted = 0;
  url = '';

  private constructor(target: URL) {
    this.#server = createServer((client) => {
      this.accepted++;
      const upstream = connect(Number(target.port), target.hostname);
      for (const s of [client, upstream]) {
        this.#open.add(s);
        s.on('close', () => this.#open.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  static async start(target: string): Promise<DropProxy> {
    const proxy = new DropProxy(new URL(target));
    await new Promise<void>((resolve) => proxy.#server.listen(0, '127.0.0.1', resolve));
    proxy.url = `http://127.0.0.1:${(proxy.#server.address() as { port: number }).port}`;
    return proxy;
  }

  /** Destroys every connection open right now (both ends). */
  dropAll(): number {
    const n = this.#open.size;
    for (const s of this.#open) s.destroy();
    return n;
  }

  async close(): Promise<void> {
    this.dropAll();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}
