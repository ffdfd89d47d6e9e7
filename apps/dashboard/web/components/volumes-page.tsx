import type { Volume } from '@sandgate/contracts';
import { useState } from 'preact/hooks';
import { apiPath, volumeFiles } from '../lib/api.ts';
import { useApi } from '../lib/context.ts';
import { bytes, time } from '../lib/format.ts';
import { href, navigate } from '../lib/router.ts';
import { ErrorNote, ListTable, Panel, usePoll } from './common.tsx';
import { FilesPanel } from './files-panel.tsx';

const MiB = 1024 * 1024;

function CreateVolume({ onCreated }: { onCreated(v: Volume): void }) {
  const api = useApi();
  const [name, setName] = useState('');
  const [sizeMiB, setSizeMiB] = useState('1024');
  const [error, setError] = useState<unknown>(null);
  const create = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      const size_bytes = Math.round(Number(sizeMiB) * MiB);
      onCreated(await api.request<Volume>('POST', '/v1/volumes', { name, size_bytes }));
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form class="inline-form" onSubmit={create} aria-label="new volume">
      <label for="volume-name">Name</label>
      <input
        id="volume-name"
        required
        pattern="[a-z0-9][a-z0-9_\-]{0,62}"
        title="lowercase letters, digits, _ and -"
        value={name}
        onInput={(e) => setName(e.currentTarget.value)}
      />
      <label for="volume-size">Size (MiB)</label>
      <input
        id="volume-size"
        type="number"
        min={1}
        required
        value={sizeMiB}
        onInput={(e) => setSizeMiB(e.currentTarget.value)}
      />
      <button type="submit" class="primary">
        Create volume
      </button>
      <ErrorNote error={error} />
    </form>
  );
}

function DeleteVolume({ volume, onDeleted }: { volume: Volume; onDeleted(): void }) {
  const api = useApi();
  const [error, setError] = useState<unknown>(null);
  const remove = async () => {
    if (!confirm(`Delete the volume ${volume.name} and all its files?`)) return;
    setError(null);
    try {
      await api.request('DELETE', apiPath`/v1/volumes/${volume.name}`);
      onDeleted();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <span class="row-actions">
      <button type="button" class="danger" aria-label={`Delete volume ${volume.name}`} onClick={remove}>
        Delete
      </button>
      <ErrorNote error={error} />
    </span>
  );
}

/** Who mounts a volume: each session, linked, and whether it writes. */
function Users({ volume }: { volume: Volume }) {
  if (volume.mounted_by.length === 0) return <span class="muted">none</span>;
  return (
    <ul class="plain">
      {volume.mounted_by.map((u) => (
        <li key={u.session_id}>
          <a href={href('sessions', u.session_id)}>
            <code>{u.session_id}</code>
          </a>{' '}
          {u.read_only ? 'reads' : 'writes'}
        </li>
      ))}
    </ul>
  );
}

/** The tenant's volumes: made, listed with what they hold and who mounts them, deleted. */
export function VolumesPage() {
  const api = useApi();
  const [volumes, setVolumes] = useState<Volume[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = async () => {
    try {
      setVolumes(await api.volumes());
      setError(null);
    } catch (err) {
      setError(err);
    }
  };
  const { refresh } = usePoll(load, 5000, []);
  return (
    <Panel title="Volumes" label="volumes" actions={<CreateVolume onCreated={(v) => navigate('volumes', v.name)} />}>
      <p class="muted">
        Files that outlive sessions. A session made with a volume finds it under <code>/mnt/volumes/</code>; one session
        at a time may write to it, any number may read it.
      </p>
      <ErrorNote error={error} />
      <ListTable
        label="volumes"
        columns={['Volume', 'Used', 'Size', 'Mounted by', 'Created']}
        actions
        items={volumes}
        empty="No volumes yet."
        row={(v) => (
          <tr key={v.id} data-volume={v.name}>
            <td>
              <a href={href('volumes', v.name)}>{v.name}</a>
            </td>
            <td class="num">{bytes(v.used_bytes)}</td>
            <td class="num">{bytes(v.size_bytes)}</td>
            <td>
              <Users volume={v} />
            </td>
            <td>{time(v.created_at)}</td>
            <td>
              <DeleteVolume volume={v} onDeleted={refresh} />
            </td>
          </tr>
        )}
      />
    </Panel>
  );
}

/** One volume: what it holds and who mounts it, and its files (browse, preview, upload, download, delete). */
export function VolumePage({ name }: { name: string }) {
  const api = useApi();
  const [volume, setVolume] = useState<Volume | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = async () => {
    try {
      setVolume(await api.request<Volume>('GET', apiPath`/v1/volumes/${name}`));
      setError(null);
    } catch (err) {
      setError(err);
    }
  };
  usePoll(load, 5000, [name]);
  const title = <>Volume {name}</>;
  if (!volume) {
    return (
      <Panel title={title} label="volume">
        {error ? <ErrorNote error={error} /> : <p>Loading…</p>}
      </Panel>
    );
  }
  return (
    <>
      <Panel
        title={title}
        label="volume"
        actions={<DeleteVolume volume={volume} onDeleted={() => navigate('volumes')} />}
      >
        <ErrorNote error={error} />
        <dl class="facts">
          <div>
            <dt>used</dt>
            <dd>
              {bytes(volume.used_bytes)} of {bytes(volume.size_bytes)}
            </dd>
          </div>
          <div>
            <dt>created</dt>
            <dd>{time(volume.created_at)}</dd>
          </div>
          <div>
            <dt>mounted by</dt>
            <dd>
              <Users volume={volume} />
            </dd>
          </div>
        </dl>
      </Panel>
      <FilesPanel owner={volumeFiles(name)} refreshKey={0} />
    </>
  );
}
