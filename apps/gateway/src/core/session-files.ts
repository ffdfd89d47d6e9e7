import type { Readable } from 'node:stream';
import { SandgateError, type FileEntry } from '@sandgate/contracts';
import { limitsFor } from '@sandgate/config';
import type { GatewayDeps } from '../deps.ts';
import { storeFile, type FileSpace } from './file-space.ts';

/** A session's files, as the REST routes and the MCP tools both reach them. */
export class SessionFiles {
  readonly #d: GatewayDeps;
  constructor(d: GatewayDeps) {
    this.#d = d;
  }

  /** The directory of the tenant's session (made if missing); using it pushes the session's idle expiry forward. */
  async sessionDir(tenant: string, id: string): Promise<string> {
    const s = await this.#d.sessions.require(tenant, id);
    await this.#d.sessions.touch(s);
    return this.#d.workspaces.create(s.id);
  }

  /** The session's files as a FileSpace (see sessionDir); a new file must fit in the tenant's storage quota. */
  async space(tenant: string, id: string): Promise<FileSpace> {
    return this.#spaceOf(tenant, id, await this.sessionDir(tenant, id), true);
  }

  /**
   * Streams `source` into the session at `path` (a client path, checked here); an existing file needs `overwrite`.
   * Refused before anything is kept when the data directory is short of free space (insufficient_storage) or the file
   * would take the tenant past its storage quota (storage_quota_exceeded); the session's new size is then recorded.
   * `maxBytes` bounds the file (default SANDGATE_MAX_UPLOAD_BYTES); without `tenantQuota` only the session's disk
   * quota bounds it, as for files a run writes (the tenant's quota is checked before each run).
   */
  async store(
    tenant: string,
    sessionId: string,
    dir: string,
    path: string,
    source: Readable | NodeJS.ReadableStream,
    overwrite: boolean,
    { maxBytes = this.#d.config.maxUploadBytes, tenantQuota = true } = {},
  ): Promise<FileEntry> {
    const space = this.#spaceOf(tenant, sessionId, dir, tenantQuota);
    return storeFile(this.#d.config, this.#d.signer, space, path, source, { maxBytes, overwrite });
  }

  /** Measures the session's files again, for the tenant's storage quota (after an upload or a delete). */
  async recordUsage(tenant: string, sessionId: string): Promise<void> {
    await this.#d.ledger.record(tenant, sessionId, await this.#d.workspaces.usedBytes(sessionId));
  }

  #spaceOf(tenant: string, sessionId: string, dir: string, tenantQuota: boolean): FileSpace {
    const { config, ledger } = this.#d;
    const limit = tenantQuota ? limitsFor(config, tenant).storage_bytes : 0;
    return {
      owner: sessionId,
      dir,
      admit: async (bytes) => {
        if (limit === 0) return;
        const used = await ledger.total(tenant);
        if (used + bytes > limit) {
          throw new SandgateError(
            'storage_quota_exceeded',
            `this file of ${bytes} bytes would take the tenant's files ` +
              `to ${used + bytes} bytes; the quota is ${limit} bytes. Delete files or sessions to make room.`,
          );
        }
      },
      measure: () => this.recordUsage(tenant, sessionId),
    };
  }
}
