import type { FileEntry } from '@sandgate/contracts';
import { useRef, useState } from 'preact/hooks';
import { ApiError } from '../lib/api.ts';
import { useApi } from '../lib/context.ts';
import { bytes } from '../lib/format.ts';

interface Upload {
  id: number;
  name: string;
  size: number;
  progress: number;
  error: string | null;
  done: boolean;
}
let uploadSeq = 0;

/**
 * Upload to `owner` (the files path of a session or a volume) by drag-and-drop onto the zone, or with the file
 * picker (the keyboard way). Each file shows a progress bar; an existing file is replaced only after the user says so.
 */
export function DropUpload({ owner, onUploaded }: { owner: string; onUploaded(files: FileEntry[]): void }) {
  const api = useApi();
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [over, setOver] = useState(false);
  const picker = useRef<HTMLInputElement>(null);
  const update = (id: number, patch: Partial<Upload>) =>
    setUploads((list) => list.map((u) => (u.id === id ? { ...u, ...patch } : u)));

  const send = async (file: File) => {
    const id = ++uploadSeq;
    setUploads((list) => [
      ...list.filter((u) => !u.done),
      { id, name: file.name, size: file.size, progress: 0, error: null, done: false },
    ]);
    const onProgress = (progress: number) => update(id, { progress });
    try {
      let files: FileEntry[];
      try {
        files = await api.upload(owner, file, { onProgress });
      } catch (err) {
        if (!(err instanceof ApiError && err.code === 'file_exists' && confirm(`${file.name} exists. Replace it?`)))
          throw err;
        files = await api.upload(owner, file, { onProgress, overwrite: true });
      }
      update(id, { done: true, progress: 1 });
      onUploaded(files);
    } catch (err) {
      update(id, { error: err instanceof Error ? err.message : String(err), done: true });
    }
  };
  const sendAll = (list: FileList | null | undefined) => {
    for (const f of Array.from(list ?? [])) void send(f);
  };

  return (
    <div
      class={`dropzone${over ? ' over' : ''}`}
      data-testid="dropzone"
      onDragOver={(e) => {
        e.preventDefault();
        setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={(e) => {
        e.preventDefault();
        setOver(false);
        sendAll(e.dataTransfer?.files);
      }}
    >
      <p>
        Drop files here, or{' '}
        <button type="button" onClick={() => picker.current?.click()}>
          choose files
        </button>
      </p>
      <input
        ref={picker}
        type="file"
        multiple
        hidden
        aria-label="files to upload"
        onChange={(e) => {
          sendAll(e.currentTarget.files);
          e.currentTarget.value = '';
        }}
      />
      {uploads.length > 0 && (
        <ul class="uploads" aria-label="uploads">
          {uploads.map((u) => (
            <li key={u.id} data-upload={u.name} data-done={String(u.done && !u.error)}>
              <span>
                {u.name} <span class="muted">({bytes(u.size)})</span>
              </span>
              <progress max={1} value={u.progress} aria-label={`upload of ${u.name}`} />
              <span aria-live="polite">
                {u.error ? (
                  <span class="error">{u.error}</span>
                ) : u.done ? (
                  'uploaded'
                ) : (
                  `${Math.round(u.progress * 100)}%`
                )}
              </span>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
