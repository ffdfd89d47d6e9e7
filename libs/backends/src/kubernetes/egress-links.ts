import { connect, type Socket } from 'node:net';
import type { EgressProxy } from '../network/egress-proxy.ts';
import type { BackendLogger } from '../logger.ts';

/** Connections kept parked with a session Pod's agent, ready for its sandbox's next connections out. */
const PARKED = 4;
/** A link whose connections fail this many times in a row stops: its Pod is gone (the next run links it again). */
const MAX_FAILURES = 5;
const RETRY_MS = 500;

/** Where a session Pod's agent listens, and the token it wants. */
export interface AgentAddress {
  host: string;
  port: number;
  token: string;
}

interface Link extends AgentAddress {
  sessionId: string;
  tenant: string;
  parked: Set<Socket>;
  failures: number;
  stopped: boolean;
}

/**
 * The way out of Kubernetes session Pods, which reach nothing at all: this worker opens connections to a session
 * Pod's agent ahead of need (an `egress` hello with the agent's token) and keeps PARKED of them there. A connection
 * the sandbox makes to its proxy port takes one: the agent sends "+", this worker answers "!" and hands the
 * connection to its egress proxy, which knows the session from the link it came by (images/runtime/agent/
 * sandgate_egress.py, ReverseRelay). Any worker that connects to the Pod links it; the proxy applies the same checks
 * whichever worker's link a connection takes.
 */
export class EgressLinks {
  readonly #links = new Map<string, Link>();

  readonly #log: BackendLogger;
  constructor(
    readonly proxy: EgressProxy,
    log: BackendLogger,
  ) {
    this.#log = log;
    proxy.onCut((sessionId) => this.stop(sessionId));
  }

  /** Keeps connections parked with the session's Pod at `agent`, unless this worker does already. */
  start(sessionId: string, tenant: string, agent: AgentAddress): void {
    const existing = this.#links.get(sessionId);
    if (existing !== undefined && existing.host === agent.host && existing.token === agent.token) {
      if (existing.parked.size === 0) this.#fill(existing);
      return;
    }
    this.stop(sessionId);
    const link: Link = { ...agent, sessionId, tenant, parked: new Set(), failures: 0, stopped: false };
    this.#links.set(sessionId, link);
    this.#fill(link);
  }

  /** Parks no more for the session, and closes what is parked (connections already taken are the proxy's). */
  stop(sessionId: string): void {
    const link = this.#links.get(sessionId);
    if (link === undefined) return;
    this.#links.delete(sessionId);
    link.stopped = true;
    for (const s of link.parked) s.destroy();
    link.parked.clear();
  }

  retain(live: ReadonlySet<string>): void {
    for (const id of [...this.#links.keys()]) if (!live.has(id)) this.stop(id);
  }

  close(): void {
    for (const id of [...this.#links.keys()]) this.stop(id);
  }

  #fill(link: Link): void {
    while (!link.stopped && link.parked.size < PARKED) this.#park(link);
  }

  #park(link: Link): void {
    const socket = connect({ host: link.host, port: link.port });
    link.parked.add(socket);
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 10_000);
    socket.once('connect', () => socket.write(`${JSON.stringify({ op: 'egress', token: link.token })}\n`));
    const taken = (chunk: Buffer): void => {
      socket.off('data', taken);
      socket.off('close', lost);
      link.parked.delete(socket);
      // The agent sends "+" alone and nothing more until it has our "!": no byte of the sandbox's is in `chunk`.
      if (chunk.length !== 1 || chunk[0] !== 0x2b || link.stopped) {
        socket.destroy();
        return;
      }
      link.failures = 0;
      socket.write('!');
      this.proxy.serve(link.sessionId, link.tenant, socket);
      this.#fill(link);
    };
    const lost = (): void => {
      socket.off('data', taken);
      link.parked.delete(socket);
      if (link.stopped) return;
      link.failures += 1;
      if (link.failures >= MAX_FAILURES) {
        this.#log.warn({ sessionId: link.sessionId, host: link.host }, "session Pod's agent takes no egress link");
        this.stop(link.sessionId);
        return;
      }
      setTimeout(() => this.#fill(link), RETRY_MS * link.failures).unref();
    };
    socket.on('data', taken);
    socket.once('close', lost);
    socket.on('error', () => {});
  }
}
