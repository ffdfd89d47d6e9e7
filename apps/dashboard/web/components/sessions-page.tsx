import type { MountVolume, Session, Volume } from '@sandgate/contracts';
import { useEffect, useState } from 'preact/hooks';
import { apiPath } from '../lib/api.ts';
import { useApi } from '../lib/context.ts';
import { time } from '../lib/format.ts';
import { href, navigate } from '../lib/router.ts';
import { ErrorNote, ListTable, LoadMore, Panel, StateBadge, usePaged, usePoll } from './common.tsx';
import { TemplatePicker } from './template-picker.tsx';

export function SessionActions({ session, onChange }: { session: Session; onChange(): void }) {
  const api = useApi();
  const [error, setError] = useState<unknown>(null);
  const act = async (method: string, path: string, confirmText?: string) => {
    if (confirmText && !confirm(confirmText)) return;
    setError(null);
    try {
      await api.request(method, path);
      onChange();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <span class="row-actions">
      {session.mode === 'stateful' && (
        <a class="button" href={href('notebook', session.id)}>
          Notebook
        </a>
      )}
      <button
        type="button"
        onClick={() => act('POST', apiPath`/v1/sessions/${session.id}/restart`)}
        aria-label={`Restart ${session.id}`}
      >
        Restart
      </button>
      <button
        type="button"
        class="danger"
        aria-label={`Delete ${session.id}`}
        onClick={() => act('DELETE', apiPath`/v1/sessions/${session.id}`, `Delete ${session.id} and all its files?`)}
      >
        Delete
      </button>
      <ErrorNote error={error} />
    </span>
  );
}

type Use = 'none' | 'rw' | 'ro';

/** For each of the tenant's volumes: not mounted, mounted read-write, or read-only (at /mnt/volumes/<name>). */
function VolumePicker({ uses, onChange }: { uses: Record<string, Use>; onChange(name: string, use: Use): void }) {
  const api = useApi();
  const [volumes, setVolumes] = useState<Volume[] | null>(null);
  useEffect(() => {
    api.volumes().then(setVolumes, () => setVolumes([]));
  }, []);
  if (!volumes || volumes.length === 0) return null;
  return (
    <fieldset class="volume-picker">
      <legend>Volumes</legend>
      {volumes.map((v) => (
        <span key={v.name}>
          <label for={`mount-${v.name}`}>{v.name}</label>
          <select
            id={`mount-${v.name}`}
            value={uses[v.name] ?? 'none'}
            onChange={(e) => onChange(v.name, e.currentTarget.value as Use)}
          >
            <option value="none">not mounted</option>
            <option value="rw">read-write</option>
            <option value="ro">read-only</option>
          </select>
        </span>
      ))}
    </fieldset>
  );
}

function CreateSession({ onCreated }: { onCreated(s: Session): void }) {
  const api = useApi();
  const [mode, setMode] = useState<'process' | 'stateful'>('process');
  const [uses, setUses] = useState<Record<string, Use>>({});
  const [template, setTemplate] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const create = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const volumes: MountVolume[] = Object.entries(uses)
      .filter(([, use]) => use !== 'none')
      .map(([name, use]) => ({ name, read_only: use === 'ro' }));
    setBusy(true);
    try {
      const body = { mode, ...(volumes.length ? { volumes } : {}), ...(template ? { template } : {}) };
      onCreated(await api.request<Session>('POST', '/v1/sessions', body));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="inline-form" onSubmit={create}>
      <label for="session-mode">Mode</label>
      <select id="session-mode" value={mode} onChange={(e) => setMode(e.currentTarget.value as typeof mode)}>
        <option value="process">process: each run a new process</option>
        <option value="stateful">stateful: a notebook interpreter</option>
      </select>
      <TemplatePicker id="session-template" value={template} onChange={setTemplate} />
      <button type="submit" class="primary" disabled={busy} aria-busy={busy}>
        {busy ? 'Creating…' : 'Create session'}
      </button>
      <VolumePicker uses={uses} onChange={(name, use) => setUses((u) => ({ ...u, [name]: use }))} />
      <ErrorNote error={error} />
    </form>
  );
}

/** The tenant's live sessions, newest first, refreshed every few seconds. */
export function SessionsPage() {
  const api = useApi();
  const list = usePaged<Session>((cursor) => api.sessions(cursor), []);
  const { refresh } = usePoll(list.reload, 5000, [list.reload]);
  return (
    <Panel
      title="Sessions"
      label="sessions"
      actions={<CreateSession onCreated={(s) => navigate(s.mode === 'stateful' ? 'notebook' : 'sessions', s.id)} />}
    >
      <ErrorNote error={list.error} />
      <ListTable
        label="sessions"
        columns={['Session', 'Mode', 'State', 'Created', 'Expires']}
        actions
        items={list.items}
        empty="No sessions yet. Create one, or start a run."
        row={(s) => (
          <tr key={s.id} data-session={s.id}>
            <td>
              <a href={href('sessions', s.id)}>
                <code>{s.id}</code>
              </a>
            </td>
            <td>{s.mode}</td>
            <td>
              <StateBadge state={s.state} />
            </td>
            <td>{time(s.created_at)}</td>
            <td>{time(s.expires_at)}</td>
            <td>
              <SessionActions session={s} onChange={refresh} />
            </td>
          </tr>
        )}
      />
      <LoadMore next={list.next} onMore={list.more} />
    </Panel>
  );
}
