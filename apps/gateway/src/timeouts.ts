import type { FastifyRequest } from 'fastify';
import type { Config } from '@sandgate/config';

/** A client has this long to send its request line and headers (slowloris). */
export const HEADERS_TIMEOUT_MS = 10_000;
/**
 * A connection on which nothing moves for this long is closed: a stalled upload, a client that stopped reading.
 * SSE streams send a heartbeat every 15 s and `?wait=` long polls lift it for their wait (holdOpen).
 */
export const IDLE_TIMEOUT_MS = 75_000;
/** An idle keep-alive connection is kept this long for the client's next request (under IDLE_TIMEOUT_MS). */
export const KEEP_ALIVE_TIMEOUT_MS = 72_000;
/** How often Node checks the header and request deadlines of open connections. */
const DEADLINE_CHECK_MS = 1000;

/**
 * Fastify's server options that bound slow and abusive clients (docs/reliability.md has the table). The whole request,
 * headers and body, must arrive within SANDGATE_REQUEST_TIMEOUT_S: an upload may not trickle forever. The response is
 * not bounded by it, so SSE streams and long polls are untouched.
 */
export function serverTimeouts(config: Pick<Config, 'requestTimeoutMs'>) {
  return {
    requestTimeout: config.requestTimeoutMs,
    connectionTimeout: IDLE_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    http: {
      headersTimeout: Math.min(HEADERS_TIMEOUT_MS, config.requestTimeoutMs),
      // Node's default, 30 s, would let a slowloris client hold its socket 30 s past its deadline.
      connectionsCheckingInterval: DEADLINE_CHECK_MS,
    },
  };
}

/**
 * Keeps the connection of a request that will be silent for `waitMs` (a long poll) from the idle timeout; `Infinity`
 * for one silent until its run ends (an MCP tool call follows its run however long it waits in the queue).
 */
export function holdOpen(req: FastifyRequest, waitMs: number): void {
  if (waitMs > 0) req.raw.socket.setTimeout(waitMs === Infinity ? 0 : waitMs + IDLE_TIMEOUT_MS);
}
