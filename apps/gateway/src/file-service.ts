import type { Readable } from 'node:stream';
import type { FileEntry } from '@sandgate/contracts';
import { normalizeUserPath, writeFileInside } from '@sandgate/storage';
import type { GatewayDeps } from './deps.ts';
import { presentFile } from './present.ts';

/** A session's files, as the REST routes and the MCP tools both reach them. */
export class FileService {
  constructor(private readonly d: GatewayDeps) {}

  /** The directory of the tenant's session (made if missing); using it pushes the session's idle expiry forward. */
  async sessionDir(tenant: string, id: string): Promise<string> {
    const s = await this.d.sessions.require(tenant, id);
    await this.d.sessions.touch(s);
    return this.d.workspaces.create(s.id);
  }

  /** Streams `source` into the session at `path` (a client path, checked here); an existing file needs `overwrite`. */
  async store(
    sessionId: string, dir: string, path: string, source: Readable | NodeJS.ReadableStream, overwrite: boolean,
  ): Promise<FileEntry> {
    const { config, signer } = this.d;
    const stat = await writeFileInside(dir, normalizeUserPath(path), source, {
      maxBytes: config.maxUploadBytes, overwrite, owner: { uid: config.sandboxUid, gid: config.sandboxUid },
    });
    return presentFile(sessionId, { path, size: stat.size, mtimeMs: stat.mtimeMs }, signer);
  }
}
