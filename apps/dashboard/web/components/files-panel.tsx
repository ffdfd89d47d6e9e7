import type { FileEntry } from '@sandgate/contracts';
import { useState } from 'preact/hooks';
import { sameOrigin } from '../lib/api.ts';
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

/**
 * The files of a session or a volume (`owner`: its files path, sessionFiles or volumeFiles): upload, list (path
 * order, paginated), preview, download, delete.
 */
export function FilesPanel({ owner, refreshKey }: { owner: string; refreshKey: number }) {
  const api = useApi();
  const list = usePaged<FileEntry>((cursor) => api.files(owner, cursor), [owner]);
  const { refresh } = usePoll(list.reload, 10_000, [list.reload, refreshKey]);
  return (
    <Panel title="Files" label="files">
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
