import type { FileEntry } from '@sandgate/contracts';
import { useEffect, useRef, useState } from 'preact/hooks';
import { sameOrigin } from '../lib/api.ts';
import { followEvents, type ConnectionState } from '../lib/event-stream.ts';
import { applyFileEvent } from '../lib/file-events.ts';
import { useApi } from '../lib/context.ts';
import { bytes, time } from '../lib/format.ts';
import { ErrorNote, ListTable, LoadMore, Panel, usePaged, usePoll } from './common.tsx';
import { DropUpload } from './drop-upload.tsx';
import { FilePreview, previewKind } from './file-preview.tsx';

function FileRow({ owner, file, onDeleted }: { owner: string; file: FileEntry; onDeleted(): void }) {
  const api = useApi();
  const [open, setOpen] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const canPreview = previewKind(file.mime_type, file.path) !== null;
  const remove = async () => {
    if (!confirm(`Delete ${file.path}?`)) return;
    try {
      await api.request('DELETE', `${owner}/${file.path.split('/').map(encodeURIComponent).join('/')}`);
      onDeleted();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <>
      <tr data-file={file.path}>
        <td>
          {canPreview ? (
            <button type="button" class="link" aria-expanded={open} onClick={() => setOpen(!open)}>
              {file.path}
            </button>
          ) : (
            file.path
          )}
        </td>
        <td class="num">{bytes(file.size_bytes)}</td>
        <td>{file.mime_type}</td>
        <td>{time(file.modified_at)}</td>
        <td class="row-actions">
          <a class="button" href={sameOrigin(file.download_url)} download={file.filename}>
            Download <span class="sr-only">{file.path}</span>
          </a>
          <button type="button" class="danger" onClick={remove} aria-label={`Delete ${file.path}`}>
            Delete
          </button>
          <ErrorNote error={error} />
        </td>
      </tr>
      {open && (
        <tr class="preview-row">
          <td colSpan={5}>
            <FilePreview url={file.download_url} name={file.filename} mime={file.mime_type} path={file.path} />
          </td>
        </tr>
      )}
    </>
  );
}

/** Never an event of a file stream: it goes on until the panel closes. */
const NO_LAST_EVENT = '\u0000';
/** How often the list is read again while file events keep it current (a fallback), and while none do. */
const POLL_LIVE_MS = 60_000;
const POLL_MS = 10_000;

/**
 * Follows `url` (a session's file events) while the panel is shown: `apply` gets each event; the state says whether
 * the stream is open. A stream refused (404, 501) leaves the panel to its polling.
 */
function useFileEvents(url: string | undefined, apply: (ev: { event: string; data: string }) => void) {
  const api = useApi();
  const [state, setState] = useState<ConnectionState | null>(null);
  const latest = useRef(apply);
  latest.current = apply;
  useEffect(() => {
    if (url === undefined) return undefined;
    const ac = new AbortController();
    void followEvents(url, {
      headers: () => api.headers(),
      after: null,
      signal: ac.signal,
      lastEvent: NO_LAST_EVENT,
      onEvent: (ev) => latest.current(ev),
      onState: (s) => setState(s),
    }).catch(() => setState('ended'));
    return () => ac.abort();
  }, [url]);
  return state;
}

/**
 * The files of a session or a volume (`owner`: its files path, sessionFiles or volumeFiles): upload, list (path
 * order, paginated), preview, download, delete. With `events` (a session's file events), the list follows them live.
 */
export function FilesPanel({ owner, refreshKey, events }: { owner: string; refreshKey: number; events?: string }) {
  const api = useApi();
  const list = usePaged<FileEntry>((cursor) => api.files(owner, cursor), [owner]);
  const live = useFileEvents(events, (ev) => {
    let reload = false;
    list.patch((items) => {
      const applied = applyFileEvent(items, ev);
      reload = applied.reload;
      return applied.items;
    });
    if (reload) refresh();
  });
  const { refresh } = usePoll(list.reload, live === 'open' ? POLL_LIVE_MS : POLL_MS, [list.reload, refreshKey, live]);
  return (
    <Panel title="Files" label="files">
      {events !== undefined && (
        <p class="muted" data-live={live ?? 'connecting'}>
          {live === 'open' ? 'Live: changes show as they happen.' : 'Connecting to live changes…'}
        </p>
      )}
      <DropUpload owner={owner} onUploaded={refresh} />
      <ErrorNote error={list.error} />
      <ListTable
        label="files"
        columns={['Path', 'Size', 'Type', 'Modified']}
        actions
        items={list.items}
        empty="No files yet."
        row={(f) => <FileRow key={f.path} owner={owner} file={f} onDeleted={refresh} />}
      />
      <LoadMore next={list.next} onMore={list.more} />
    </Panel>
  );
}
