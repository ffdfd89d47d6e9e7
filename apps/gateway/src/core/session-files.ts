import type { Readable } from 'node:stream';
import { statfs } from 'node:fs/promises';
import { SandgateError, type FileEntry } from '@sandgate/contracts';
import { limitsFor } from '@sandgate/config';
import { normalizeUserPath, writeFileInside } from '@sandgate/storage';
import type { GatewayDeps } from '../deps.ts';
import { presentFile } from './present.ts';

/** A session's files, as the REST routes and the MCP tools both reach them. */
export class SessionFiles {
  constructor(private readonly d: GatewayDeps) {}

  /** The directory of the tenant's session (made if missing); using it pushes the session's idle expiry forward. */
  async sessionDir(tenant: string, id: string): Promise<string> {
    const s = await this.d.sessions.require(tenant, id);
    await this.d.sessions.touch(s);
    return this.d.workspaces.create(s.id);
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
    { maxBytes = this.d.config.maxUploadBytes, tenantQuota = true } = {},
  ): Promise<FileEntry> {
    const { config, signer, ledger } = this.d;
    await this.checkFreeSpace();
    const limit = tenantQuota ? limitsFor(config, tenant).storage_bytes : 0;
    const stat = await writeFileInside(dir, normalizeUserPath(path), source, {
      maxBytes,
      overwrite,
      owner: { uid: config.sandboxUid, gid: config.sandboxUid },
      beforePlace: async (bytes) => {
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
    });
    await this.recordUsage(tenant, sessionId);
    return presentFile(sessionId, { path, size: stat.size, mtimeMs: stat.mtimeMs }, signer);
  }

  /** Measures the session's files again, for the tenant's storage quota (after an upload or a delete). */
  async recordUsage(tenant: string, sessionId: string): Promise<void> {
    await this.d.ledger.record(tenant, sessionId, await this.d.workspaces.usedBytes(sessionId));
  }

  /** insufficient_storage while the data directory has less than SANDGATE_MIN_FREE_BYTES free. */
  private async checkFreeSpace(): Promise<void> {
    const { dataDir, minFreeBytes } = this.d.config;
    const fs = await statfs(dataDir);
    const free = fs.bavail * fs.bsize;
    if (free < minFreeBytes) {
      throw new SandgateError(
        'insufficient_storage',
        `the server has ${free} bytes free for files, less than the ` +
          `${minFreeBytes} it keeps in reserve; uploads resume when space is freed`,
      );
    }
  }
}
