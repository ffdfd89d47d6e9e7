import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { problem } from './plugins/errors.ts';

/** An upgrade request's connection, which the route that answers it may take over. */
export interface Upgrade {
  socket: Socket;
  /** Bytes the client sent after the request's head. */
  head: Buffer;
  /** Set by the route that took the connection over: it is no longer closed once the response ends. */
  tunnelled: boolean;
}

const UPGRADES = new WeakMap<IncomingMessage, Upgrade>();

/** The connection of an upgrade request (a websocket's), for the route answering it; undefined for any other. */
export const upgradeOf = (raw: IncomingMessage): Upgrade | undefined => UPGRADES.get(raw);

/**
 * Upgrade requests (websockets) go through the app as every request does — the host and origin checks, the API key,
 * the rate limits, the route, the request log and metrics — with their response written to their connection. A route
 * that upgrades (the services proxy) takes the connection over; after any other answer it is closed, since the server
 * no longer reads HTTP from it. Only GET is upgraded (as websockets are): a body of any other method would never end.
 */
export function routeUpgrades(app: Pick<FastifyInstance, 'server' | 'routing' | 'log'>): void {
  app.server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    // The server took its own listeners off the connection: an error on it is ours to handle.
    socket.on('error', () => socket.destroy());
    if (req.method !== 'GET') {
      const body = JSON.stringify(problem('method_not_allowed', 'only a GET request can be upgraded', req.url));
      app.log.info({ method: req.method, url: req.url }, 'upgrade refused: not a GET');
      socket.end(
        `HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/problem+json\r\nAllow: GET\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
      return;
    }
    const upgrade: Upgrade = { socket, head, tunnelled: false };
    UPGRADES.set(req, upgrade);
    const res = new ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(socket);
    res.once('finish', () => {
      if (!upgrade.tunnelled) socket.destroySoon();
    });
    app.routing(req, res);
  });
}

/**
 * A route answered the upgrade itself on the connection (a websocket server's handshake): the response is done, with
 * the 101 that the request log and metrics then see, and the connection is the route's from now on.
 */
export function tookOver(res: ServerResponse, upgrade: Upgrade): void {
  upgrade.tunnelled = true;
  res.statusCode = 101;
  res.emit('finish');
}
