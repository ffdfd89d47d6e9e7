import { CAPABILITIES } from '@sandgate/backends/capabilities';
import { SandgateError, type SessionMode } from '@sandgate/contracts';
import type { SessionRecord } from '@sandgate/state';
import type { GatewayDeps } from './deps.ts';

export interface OpenSession {
  mode?: SessionMode | undefined;
  /** Idle TTL; default SANDGATE_SESSION_TTL_M. */
  ttlSeconds?: number | undefined;
  metadata?: Record<string, string> | undefined;
}

/** Opening and closing sessions, as the REST routes and the MCP tools both do it. */
export class SessionService {
  constructor(private readonly d: GatewayDeps) {}

  /** A new session of the tenant, within its limit of live sessions, with its (empty) directory. */
  async open(tenant: string, { mode, ttlSeconds, metadata }: OpenSession = {}): Promise<SessionRecord> {
    const { config, sessions, workspaces } = this.d;
    if (mode === 'stateful' && !CAPABILITIES[config.backend].sandboxes.includes('stateful')) {
      throw new SandgateError(
        'unsupported_by_backend',
        `stateful sessions are not available on the ${config.backend} ` +
          'backend of this deployment; use a process session (mode "process"), whose files persist between runs',
      );
    }
    const s = await sessions.create(tenant, {
      ttlSeconds: ttlSeconds ?? config.sessionTtlSeconds,
      maxSessions: config.maxSessions,
      metadata: metadata ?? {},
      mode,
    });
    await workspaces.create(s.id);
    return s;
  }

  /** Deletes the tenant's session and its files; a run it holds is cancelled. session_not_found if there is none. */
  async close(tenant: string, id: string): Promise<void> {
    const { sessions, executions, workspaces } = this.d;
    const s = await sessions.require(tenant, id);
    if (s.currentExecutionId) await executions.requestCancel(s.currentExecutionId);
    await sessions.delete(s, true);
    await workspaces.remove(s.id);
    await this.d.ledger.forget(tenant, s.id);
  }
}
