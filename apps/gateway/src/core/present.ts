import type { Execution, FileEntry, Session } from '@sandgate/contracts';
import type { ExecutionRecord, SessionRecord } from '@sandgate/state';
import { mimeFor, type TreeEntry, type UrlSigner } from '@sandgate/storage';

const iso = (ms: number) => new Date(ms).toISOString();

/** API shape of a session; `egress`: its tenant is allowed egress (a private session never has it). */
export function presentSession(s: SessionRecord, egress: boolean): Session {
  return {
    id: s.id,
    mode: s.mode,
    state: s.currentExecutionId ? 'busy' : s.pausedAt !== null ? 'paused' : 'idle',
    created_at: iso(s.createdAt),
    last_used_at: iso(s.lastUsedAt),
    expires_at: iso(s.expiresAt),
    ttl_seconds: s.ttlSeconds,
    // An operation (pause, fork …) holds it with an id of its own: busy, with no execution to point at.
    current_execution_id: s.currentExecutionId?.startsWith('exec_') ? s.currentExecutionId : null,
    metadata: s.metadata,
    network: egress && !s.private ? 'egress' : 'none',
    private: s.private,
    paused_at: s.pausedAt === null ? null : iso(s.pausedAt),
    pauses_at: s.pausesAt === null ? null : iso(s.pausesAt),
    idle_pause_seconds: s.idleSeconds,
    undo: s.undo,
    forked_from: s.forkedFrom,
    template: s.template?.name ?? null,
    volumes: s.volumes.map((v) => ({ name: v.name, path: v.path, read_only: v.read_only })),
  };
}

/** API shape of an execution; download URLs are signed afresh on every read, so they never go stale. */
export function presentExecution(r: ExecutionRecord, publicUrl: string, signer: UrlSigner): Execution {
  const self = `${publicUrl}/v1/executions/${r.id}`;
  const result = r.result && {
    ...r.result,
    artifacts: r.result.artifacts.map((a) => ({ ...a, download_url: signer.downloadUrl(r.session_id, a.path) })),
  };
  return {
    id: r.id,
    session_id: r.session_id,
    language: r.language,
    state: r.state,
    created_at: iso(r.created_at),
    started_at: r.started_at === null ? null : iso(r.started_at),
    finished_at: r.finished_at === null ? null : iso(r.finished_at),
    timeout_ms: r.timeout_ms,
    result,
    callback_url: r.callback_url ?? null,
    webhook: r.webhook ?? null,
    links: {
      self,
      events: `${self}/events`,
      cancel: `${self}/cancel`,
      session: `${publicUrl}/v1/sessions/${r.session_id}`,
    },
  };
}

/**
 * An event's data as a client gets it: an artifact's download URL, and those of the result's artifacts, signed now by
 * the gateway (workers hold no signing key: what they wrote is the file's plain URL). Other events pass unchanged.
 */
export function presentEventData(type: string, data: string, sessionId: string, signer: UrlSigner): string {
  if (type !== 'artifact' && type !== 'result') return data;
  const sign = <A extends { path: string }>(a: A): A => ({ ...a, download_url: signer.downloadUrl(sessionId, a.path) });
  const parsed = JSON.parse(data) as { artifact?: { path: string }; result?: { artifacts?: { path: string }[] } };
  if (parsed.artifact) parsed.artifact = sign(parsed.artifact);
  if (parsed.result?.artifacts) parsed.result.artifacts = parsed.result.artifacts.map(sign);
  return JSON.stringify(parsed);
}

/** A file of a session or volume (`owner`: its id), with a download URL signed now. */
export function presentFile(
  owner: string,
  e: Pick<TreeEntry, 'path' | 'size' | 'mtimeMs'>,
  signer: UrlSigner,
): FileEntry {
  return {
    path: e.path,
    filename: e.path.slice(e.path.lastIndexOf('/') + 1),
    size_bytes: e.size,
    mime_type: mimeFor(e.path),
    modified_at: iso(e.mtimeMs),
    download_url: signer.downloadUrl(owner, e.path),
  };
}
