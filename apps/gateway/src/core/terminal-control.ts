import type { Socket } from 'node:net';
import { NoSandbox, ServiceAgents, TooManyTerminals } from '@sandgate/backends/services';
import { SandgateError, type TerminalStatus } from '@sandgate/contracts';
import type { SessionRecord } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';
import { requireAgentSocket, sandboxUnreachable } from './service-manager.ts';

/** How long a signed terminal URL opens a terminal: long enough for a browser to connect, short enough to leak. */
export const TERMINAL_URL_TTL_S = 60;
/** Retry-After of too_many_terminals: no time frees a slot, only a terminal that closes. */
const TOO_MANY_RETRY_S = 10;

export interface TerminalSize {
  cols: number;
  rows: number;
}

/**
 * Terminals of sessions (docs/terminal.md): a login shell on a pty in the session's sandbox, reached as services are,
 * through the sandbox agent's services socket (Docker) or its services port (a Kubernetes session Pod). A session with
 * no sandbox (paused, or never run) gets one first, as a resume would make it.
 */
export class TerminalControl {
  readonly #agents: ServiceAgents;

  readonly #d: GatewayDeps;
  constructor(d: GatewayDeps) {
    this.#d = d;
    this.#agents = new ServiceAgents(d.config.dataDir);
  }

  /** The session, by API key's tenant or by a signed URL (each signature opens one terminal, once). */
  async authorise(
    tenant: string | null,
    sessionId: string,
    query: { expires?: string | undefined; sig?: string | undefined },
  ): Promise<SessionRecord> {
    if (tenant !== null) return this.#d.sessions.require(tenant, sessionId);
    if (query.sig === undefined) {
      throw new SandgateError(
        'unauthorized',
        'send an API key as "Authorization: Bearer <key>", or open a signed URL (POST …/terminal/url)',
      );
    }
    const refused = new SandgateError('forbidden', 'the terminal URL is not valid: it expired, or was used already');
    if (!this.#d.signer.verifyGrant('terminal', sessionId, query.expires, query.sig)) throw refused;
    const first = await this.#d.redis.set(this.#d.keys.usedTerminalUrl(query.sig), '1', 'EX', TERMINAL_URL_TTL_S, 'NX');
    if (first !== 'OK') throw refused;
    const owner = await this.#d.sessions.ownerOf(sessionId);
    const session = owner === null ? null : await this.#d.sessions.get(owner, sessionId);
    if (session === null) throw new SandgateError('session_not_found', `session ${sessionId} has ended`);
    return session;
  }

  /** How many terminals the session has open, and how many it may. */
  async status(tenant: string, sessionId: string): Promise<TerminalStatus> {
    await this.#d.sessions.require(tenant, sessionId);
    const open = await this.#agents.terminalsOpen(sessionId).catch((err: unknown) => {
      throw sandboxUnreachable(err);
    });
    return { open, max: this.#d.config.maxTerminals };
  }

  /** A URL that opens a terminal of the session without a header (for a browser), once, within a minute. */
  async signedUrl(tenant: string, sessionId: string): Promise<{ url: string; expires_at: string }> {
    requireAgentSocket(this.#d.config.backend, 'terminals', 'docs/terminal.md');
    await this.#d.sessions.require(tenant, sessionId);
    const { expires, sig } = this.#d.signer.signGrant('terminal', sessionId, TERMINAL_URL_TTL_S);
    const base = this.#d.config.publicUrl.replace(/\/+$/, '').replace(/^http/, 'ws');
    return {
      url: `${base}/v1/sessions/${sessionId}/terminal?expires=${expires}&sig=${sig}`,
      expires_at: new Date(Number(expires) * 1000).toISOString(),
    };
  }

  /** Opens a terminal in the session's sandbox, making the sandbox first if it has none; the agent's connection. */
  async open(session: SessionRecord, size: TerminalSize): Promise<Socket> {
    requireAgentSocket(this.#d.config.backend, 'terminals', 'docs/terminal.md');
    const { maxTerminals } = this.#d.config;
    if (session.oneshot) throw new SandgateError('session_not_found', `session ${session.id} is not a live session`);
    if (maxTerminals === 0) {
      throw new SandgateError('too_many_terminals', 'terminals are turned off here (SANDGATE_MAX_TERMINALS=0)');
    }
    try {
      return await this.#connect(session, size);
    } catch (err) {
      if (!(err instanceof NoSandbox)) throw err;
    }
    await this.#d.sessionLifecycle.bringUp(session.tenant, session.id);
    try {
      return await this.#connect(session, size);
    } catch (err) {
      if (err instanceof NoSandbox) throw sandboxUnreachable(err);
      throw err;
    }
  }

  async #connect(session: SessionRecord, size: TerminalSize): Promise<Socket> {
    const max = this.#d.config.maxTerminals;
    return this.#agents.terminal(session.id, size, max).catch((err: unknown) => {
      if (err instanceof TooManyTerminals) {
        throw new SandgateError(
          'too_many_terminals',
          `session ${session.id} has ${err.open} terminals open, its limit (SANDGATE_MAX_TERMINALS); close one first`,
          { extra: { retry_after: TOO_MANY_RETRY_S } },
        );
      }
      if (err instanceof NoSandbox) throw err;
      throw sandboxUnreachable(err);
    });
  }
}
