import type { Socket } from 'node:net';
import { CAPABILITIES } from '@sandgate/backends/capabilities';
import { NoSandbox, ServiceAgents, type AgentService } from '@sandgate/backends/services';
import { SandgateError, isTerminal, type Service, type ServicePreview, type StartService } from '@sandgate/contracts';
import type { ServiceRecord, SessionRecord } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';
import type { ExecutionControl } from './execution-control.ts';
import { previewSignatureOk, previewToken, previewUrl, readPreviewToken } from '../preview-links.ts';

/** How long POST .../services waits for the service to have started before it answers `starting`. */
const START_WAIT_SECONDS = 30;
/** Services a session may have at once (running or starting). */
export const MAX_SERVICES = 8;
/** Retry-After of too_many_services: no time frees a slot, only a service that ends. */
const TOO_MANY_SERVICES_RETRY_S = 10;
const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/**
 * A session's services: long-running programs in its sandbox (images/runtime/agent/sandgate_services.py). A start is
 * an execution of the session (queued behind its current one, in the sandbox it gets); the state, logs, stop and
 * proxied connections then go straight to the sandbox's agent through its services socket on this host.
 */
export class ServiceManager {
  readonly #agents: ServiceAgents;
  readonly #executions: ExecutionControl;

  readonly #d: GatewayDeps;
  constructor(d: GatewayDeps) {
    this.#d = d;
    this.#agents = new ServiceAgents(d.config.dataDir);
    this.#executions = d.executionControl;
  }

  async start(tenant: string, sessionId: string, body: StartService): Promise<Service> {
    requireAgentSocket(this.#d.config.backend, 'services', 'docs/services.md');
    const session = await this.#d.sessions.require(tenant, sessionId);
    if (session.oneshot) throw new SandgateError('session_not_found', `session ${sessionId} is not a live session`);
    const all = await this.list(tenant, sessionId);
    const same = all.find((s) => s.name === body.name);
    if (same && (same.state === 'running' || same.state === 'starting')) {
      throw new SandgateError(
        'service_exists',
        `service ${body.name} is ${same.state} in session ${sessionId}; stop it first, or use another name`,
      );
    }
    const live = all.filter((s) => s.state === 'running' || s.state === 'starting').length;
    if (live >= MAX_SERVICES) {
      // Room comes when one is stopped, or ends by itself: a client that stops one need not wait that long.
      throw new SandgateError(
        'too_many_services',
        `session ${sessionId} runs ${live} services, its limit; stop one first`,
        { extra: { retry_after: TOO_MANY_SERVICES_RETRY_S } },
      );
    }
    const run = await this.#executions.create(
      tenant,
      { session_id: sessionId, language: 'bash', code: body.command, ...(body.env ? { env: body.env } : {}) },
      0,
      { service: body.name },
    );
    const rec: ServiceRecord = {
      name: body.name,
      command: body.command,
      port: body.port ?? null,
      executionId: run.id,
      createdAt: run.created_at,
    };
    if (!(await this.#d.sessions.putService(sessionId, rec))) {
      throw new SandgateError('session_not_found', `session ${sessionId} does not exist or has expired`);
    }
    await this.#settled(run.id, Date.now() + START_WAIT_SECONDS * 1000);
    return this.get(tenant, sessionId, body.name);
  }

  /** Waits until the start's execution has ended, or the deadline. */
  async #settled(executionId: string, deadline: number): Promise<void> {
    const ending = this.#d.notices.expect(executionId);
    try {
      for (;;) {
        const now = await this.#d.executions.get(executionId);
        if (!now || isTerminal(now.state) || Date.now() >= deadline) return;
        await ending.next(Math.min(deadline, Date.now() + 1000));
      }
    } finally {
      ending.cancel();
    }
  }

  async list(tenant: string, sessionId: string): Promise<Service[]> {
    await this.#d.sessions.require(tenant, sessionId);
    const records = await this.#d.sessions.services(sessionId);
    if (records.length === 0) return [];
    const live = await this.#live(sessionId);
    return Promise.all(records.map((r) => this.#present(sessionId, r, live)));
  }

  async get(tenant: string, sessionId: string, name: string): Promise<Service> {
    const found = (await this.list(tenant, sessionId)).find((s) => s.name === name);
    if (!found) throw noService(sessionId, name);
    return found;
  }

  /** Output from `offset`, and where the next read starts. */
  async logs(
    tenant: string,
    sessionId: string,
    name: string,
    offset: number,
  ): Promise<{ output: string; offset: number; next_offset: number; service: Service }> {
    const service = await this.get(tenant, sessionId, name);
    const logs = await this.#agents.logs(sessionId, name, offset).catch((err: unknown) => {
      if (err instanceof NoSandbox) return undefined;
      throw unreachable(err);
    });
    if (logs === undefined) return { output: '', offset, next_offset: offset, service };
    // One character per byte on the wire; the service wrote UTF-8 (or anything: invalid bytes become U+FFFD).
    return {
      output: Buffer.from(logs.data, 'latin1').toString('utf8'),
      offset: logs.offset,
      next_offset: logs.next_offset,
      service,
    };
  }

  /** SIGTERM, then SIGKILL after `graceMs`: answers once it has ended. */
  async stop(tenant: string, sessionId: string, name: string, graceMs: number): Promise<Service> {
    const service = await this.get(tenant, sessionId, name);
    if (service.state === 'running') {
      await this.#agents.stop(sessionId, name, graceMs).catch((err: unknown) => {
        if (!(err instanceof NoSandbox)) throw unreachable(err);
      });
    } else if (service.state === 'starting') {
      await this.#d.executions.requestCancel(service.execution_id);
    }
    return this.get(tenant, sessionId, name);
  }

  /** Stops the service if it runs, and forgets it. */
  async remove(tenant: string, sessionId: string, name: string): Promise<void> {
    await this.stop(tenant, sessionId, name, 5000);
    await this.#d.sessions.removeService(sessionId, name);
  }

  /** A connection to the service's port and that port, for the proxy; the session's idle time starts again. */
  async connect(session: SessionRecord, name: string): Promise<{ socket: Socket; port: number }> {
    requireAgentSocket(this.#d.config.backend, 'services', 'docs/services.md');
    const service = await this.get(session.tenant, session.id, name);
    if (service.state !== 'running') {
      throw new SandgateError('service_not_running', `service ${name} is ${service.state}${why(service)}`);
    }
    if (service.port === null) {
      throw new SandgateError(
        'service_not_running',
        `service ${name} listens on no port yet; wait for it (its ports show on GET .../services/${name})`,
      );
    }
    void this.#d.sessions.touch(session).catch(() => {});
    const socket = await this.#agents.connect(session.id, service.port).catch((err: unknown) => {
      throw unreachable(err);
    });
    return { socket, port: service.port };
  }

  /**
   * A link that opens the service without an API key until it expires, this instance of it only (a service started
   * again under its name answers none of its links), until its links are revoked.
   */
  async share(tenant: string, sessionId: string, name: string, ttlSeconds: number): Promise<ServicePreview> {
    await this.#d.sessions.require(tenant, sessionId);
    const state = await this.#d.sessions.previewState(sessionId);
    const service = state?.services.find((r) => r.name === name);
    if (!state || !service) throw noService(sessionId, name);
    const expires = Math.floor(Date.now() / 1000) + ttlSeconds;
    const claim = { sessionId, executionId: service.executionId, expires };
    const token = previewToken(this.#d.signingKey, claim, { name, revocations: state.revocations[name] ?? 0 });
    return {
      url: previewUrl(this.#d.config, token),
      expires_at: new Date(expires * 1000).toISOString(),
    };
  }

  /** Revokes every preview link of the service made so far: none opens it again. Links made later work. */
  async revokePreviews(tenant: string, sessionId: string, name: string): Promise<void> {
    await this.#d.sessions.require(tenant, sessionId);
    if (!(await this.#d.sessions.revokePreviews(sessionId, name))) throw noService(sessionId, name);
  }

  /**
   * The session and service a preview token opens; forbidden when it is not one this deployment signed, it expired,
   * was revoked, or its instance of the service is gone.
   */
  async openPreview(token: string): Promise<{ session: SessionRecord; name: string }> {
    const refused = new SandgateError('forbidden', 'the preview link is not valid: it expired, or was revoked');
    const read = readPreviewToken(token);
    if (read === undefined || read.expires * 1000 <= Date.now()) throw refused;
    const state = await this.#d.sessions.previewState(read.sessionId);
    const service = state?.services.find((r) => r.executionId === read.executionId);
    if (!state || !service) throw refused;
    const binding = { name: service.name, revocations: state.revocations[service.name] ?? 0 };
    if (!previewSignatureOk(this.#d.signingKey, read, binding)) throw refused;
    const session = await this.#d.sessions.get(state.tenant, read.sessionId);
    if (session === null) throw new SandgateError('session_not_found', `session ${read.sessionId} has ended`);
    return { session, name: service.name };
  }

  /** The agent's services of the session; none when its sandbox is gone (or not made yet). */
  async #live(sessionId: string): Promise<Map<string, AgentService> | undefined> {
    try {
      return new Map((await this.#agents.status(sessionId)).map((s) => [s.name, s]));
    } catch (err) {
      if (err instanceof NoSandbox) return undefined;
      throw unreachable(err);
    }
  }

  async #present(sessionId: string, r: ServiceRecord, live: Map<string, AgentService> | undefined): Promise<Service> {
    const base = {
      name: r.name,
      session_id: sessionId,
      command: r.command,
      execution_id: r.executionId,
      proxy_url: `${this.#d.config.publicUrl.replace(/\/+$/, '')}/v1/sessions/${sessionId}/services/${r.name}/proxy/`,
      created_at: iso(r.createdAt)!,
    };
    const none = { exit_code: null, ports: [], port: r.port, started_at: null, ended_at: null, log_bytes: 0 };
    const run = await this.#d.executions.get(r.executionId);
    if (run !== null && !isTerminal(run.state)) return { ...base, ...none, state: 'starting', message: null };
    if (run !== null && (run.state !== 'completed' || run.result?.exit_code !== 0)) {
      const detail = run.result?.stderr?.trim() || run.result?.message || `the start ended ${run.state}`;
      return { ...base, ...none, state: 'failed', message: `it could not start: ${detail}` };
    }
    const agent = live?.get(r.name);
    // Started at or after this record: an entry of the agent from an earlier start of the same name is not this one.
    if (agent === undefined || agent.started_at * 1000 < r.createdAt - 1000) {
      return {
        ...base,
        ...none,
        state: 'stopped',
        message: "the session's sandbox ended or was replaced (a restart, or a change of limits or network)",
      };
    }
    return {
      ...base,
      state: agent.state,
      exit_code: agent.exit_code,
      ports: agent.ports,
      port: r.port ?? agent.ports[0] ?? null,
      started_at: iso(agent.started_at * 1000),
      ended_at: iso(agent.ended_at === null ? null : agent.ended_at * 1000),
      log_bytes: agent.log_bytes,
      message: agent.state === 'stopped' ? 'stopped on request' : null,
    };
  }
}

const why = (s: Service): string => (s.message ? `: ${s.message}` : '');
const noService = (sessionId: string, name: string) =>
  new SandgateError('service_not_found', `session ${sessionId} has no service named ${name}`);

function unreachable(err: unknown): SandgateError {
  if (err instanceof SandgateError) return err;
  const detail = err instanceof Error ? err.message : String(err);
  return new SandgateError('service_unreachable', `the service cannot be reached: ${detail}`, { cause: err });
}

/**
 * Services and terminals reach a sandbox through its agent's services socket, which not every backend offers:
 * `what` is refused with unsupported_by_backend there (`doc` says where it is explained).
 */
export function requireAgentSocket(backend: keyof typeof CAPABILITIES, what: string, doc: string): void {
  if (!CAPABILITIES[backend].services) {
    throw new SandgateError(
      'unsupported_by_backend',
      `${what} are not available on the ${backend} backend of this deployment (${doc})`,
    );
  }
}

/** A sandbox whose agent did not answer as it should: 502 sandbox_unreachable, with why. */
export function sandboxUnreachable(err: unknown): SandgateError {
  const detail = err instanceof Error ? err.message : String(err);
  return new SandgateError('sandbox_unreachable', `the session's sandbox cannot be reached: ${detail}`, { cause: err });
}
