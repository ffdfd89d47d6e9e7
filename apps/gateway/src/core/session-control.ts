import { CAPABILITIES } from '@sandgate/backends/capabilities';
import { SandgateError, type MountVolume, type Session, type SessionMode, type UndoMode } from '@sandgate/contracts';
import type { SessionRecord } from '@sandgate/state';
import { egressEntries, limitsFor } from '@sandgate/config';
import type { GatewayDeps } from '../deps.ts';
import { presentSession } from './present.ts';

export interface OpenSession {
  mode?: SessionMode | undefined;
  /** Retention: how long it is kept unused; default (and at most) the tenant's, SANDGATE_SESSION_RETENTION_S. */
  ttlSeconds?: number | undefined;
  metadata?: Record<string, string> | undefined;
  /** Idle seconds after which it pauses by itself; default SANDGATE_SESSION_IDLE_PAUSE_S. */
  idlePauseSeconds?: number | undefined;
  undo?: UndoMode | undefined;
  /** The template of its sandbox (GET /v1/templates); default: the runtime image. */
  template?: string | undefined;
  /** The tenant's volumes to mount (POST /v1/volumes); default none. */
  volumes?: readonly MountVolume[] | undefined;
}

/** Opening and closing sessions, as the REST routes and the MCP tools both do it. */
export class SessionControl {
  readonly #d: GatewayDeps;
  constructor(d: GatewayDeps) {
    this.#d = d;
  }

  /**
   * A new session of the tenant, within its limit of live sessions, with its (empty) directory and the volumes it
   * mounts: it is not made at all when one of them is missing or already has another writer.
   */
  async open(
    tenant: string,
    { mode, ttlSeconds, metadata, template, volumes, idlePauseSeconds, undo }: OpenSession = {},
  ): Promise<SessionRecord> {
    const { config, sessions, workspaces } = this.#d;
    if (mode === 'stateful' && !CAPABILITIES[config.backend].sandboxes.includes('stateful')) {
      throw new SandgateError(
        'unsupported_by_backend',
        `stateful sessions are not available on the ${config.backend} ` +
          'backend of this deployment; use a process session (mode "process"), whose files persist between runs',
      );
    }
    // Resolved now, once: the session's runs all use the image its template has at this moment.
    const resolved = template === undefined ? undefined : await this.#d.templateControl.resolve(tenant, template);
    const mounts = await this.#d.volumeControl.mounts(tenant, volumes);
    const s = await sessions.create(tenant, {
      ttlSeconds: this.retention(tenant, ttlSeconds),
      maxSessions: config.maxSessions,
      metadata: metadata ?? {},
      mode,
      idleSeconds: idlePauseSeconds ?? config.sessionIdlePauseSeconds,
      undo: undo ?? 'files',
      ...(resolved ? { template: resolved } : {}),
    });
    // A template deleted while this session was being made (its delete saw no session using it): the session goes.
    if (resolved && !(await this.#d.templates.get(resolved.name))) {
      await sessions.delete(s, true);
      throw new SandgateError('template_not_found', `template "${resolved.name}" was deleted meanwhile`);
    }
    if (mounts.length > 0) {
      try {
        // After the session exists: a claim by a session that does not exist yet would be dropped as stale.
        s.volumes = await this.#d.volumes.claim(s, mounts);
      } catch (err) {
        await sessions.delete(s, true);
        throw err;
      }
    }
    await workspaces.create(s.id);
    return s;
  }

  /** A session's retention: what it asks for, within its tenant's (which is the default). */
  retention(tenant: string, asked: number | undefined): number {
    const most = limitsFor(this.#d.config, tenant).session_retention_s;
    if (asked !== undefined && asked > most) {
      throw new SandgateError(
        'validation_failed',
        `ttl_seconds ${asked} is longer than this tenant's retention of ${most} s (SANDGATE_SESSION_RETENTION_S)`,
      );
    }
    return asked ?? most;
  }

  /** The API shape of a session of `tenant`, with the network its tenant is allowed. */
  present(s: SessionRecord): Session {
    return presentSession(s, egressEntries(this.#d.config.egress, s.tenant).length > 0);
  }

  /**
   * Marks the tenant's session as holding private data: from now on nothing in it reaches the network (the egress
   * proxy refuses it at once; its next run gets a sandbox without network, files kept). It cannot be undone.
   */
  async makePrivate(tenant: string, id: string): Promise<SessionRecord> {
    const s = await this.#d.sessions.require(tenant, id);
    return s.private ? s : this.#d.sessions.markPrivate(s);
  }

  /** Deletes the tenant's session and its files; a run it holds is cancelled. session_not_found if there is none. */
  async close(tenant: string, id: string): Promise<void> {
    const { sessions, executions, workspaces } = this.#d;
    const s = await sessions.require(tenant, id);
    if (s.currentExecutionId) await executions.requestCancel(s.currentExecutionId);
    await sessions.delete(s, true);
    await this.#d.volumes.release(s.id, s.volumes);
    await workspaces.remove(s.id);
    await this.#d.ledger.forget(tenant, s.id);
  }
}
