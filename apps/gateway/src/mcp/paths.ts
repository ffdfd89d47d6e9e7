import { MCP_DATA_ROOT, SESSION_ID_PATTERN, SandgateError, type McpArtifact } from '@sandgate/contracts';
import { mimeFor, normalizeUserPath, type UrlSigner } from '@sandgate/storage';

const SESSION_ID = new RegExp(SESSION_ID_PATTERN);
const ROOT = `${MCP_DATA_ROOT}/`;

/** A path as an MCP client gives it (absolute under /mnt/data/, or relative to it) → the session-relative path. */
export function sessionPath(p: string): string {
  const relative = p.startsWith(ROOT) ? p.slice(ROOT.length) : p;
  if (relative.startsWith('/')) {
    throw new SandgateError('invalid_path', `"${p}" is outside ${ROOT}; give a path under it or a relative one`);
  }
  return normalizeUserPath(relative);
}

/** A session-relative path as MCP clients see it: absolute in the sandbox. */
export const sandboxPath = (relative: string) => `${ROOT}${relative}`;

/** A session id the client sent: one that cannot exist reads as an unknown session, as the contract has it. */
export function checkSessionId(id: string): string {
  if (!SESSION_ID.test(id)) throw new SandgateError('session_not_found', `session ${id} does not exist`);
  return id;
}

/** A file of a session as the MCP tools list it. */
export function mcpArtifact(
  signer: UrlSigner,
  sessionId: string,
  file: { path: string; size: number; mimeType?: string },
): McpArtifact {
  return {
    path: sandboxPath(file.path),
    filename: file.path.slice(file.path.lastIndexOf('/') + 1),
    size_bytes: file.size,
    mime_type: file.mimeType ?? mimeFor(file.path),
    download_url: signer.downloadUrl(sessionId, file.path),
  };
}
