import type { Session, SessionFork, SessionPause, SessionUndo, Snapshot, SnapshotRestore } from '@sandgate/contracts';
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { apiPath } from '../lib/api.ts';
import { useApi } from '../lib/context.ts';
import { bytes, time } from '../lib/format.ts';
import { href, navigate } from '../lib/router.ts';
import { ErrorNote, ListTable, Panel } from './common.tsx';

/**
 * One action at a time on a session: which is going (its button says so, the others wait), and the error of the
 * last one. A pause, a fork or a restore takes a worker seconds; a second click meanwhile would only be refused.
 */
function useAction() {
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const run = async (name: string, work: () => Promise<void>) => {
    setBusy(name);
    setError(null);
    try {
      await work();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(null);
    }
  };
  return { busy, error, run };
}

const sessionLink = (id: string) => (
  <a href={href('sessions', id)}>
    <code>{id}</code>
  </a>
);

/** Pause or resume, fork, and undo the last run: what a session's page offers beside restart and delete. */
export function LifecycleActions({ session, onChange }: { session: Session; onChange(): void }) {
  const api = useApi();
  const { busy, error, run } = useAction();
  const [count, setCount] = useState('1');
  const [note, setNote] = useState<ComponentChildren>(null);
  const path = (action: string) => apiPath`/v1/sessions/${session.id}/${action}`;
  const paused = session.state === 'paused';

  const pause = () =>
    run('pause', async () => {
      const { variables } = await api.request<SessionPause>('POST', path('pause'), {});
      const unsaved = variables?.unsaved ?? [];
      setNote(
        unsaved.length > 0 ? (
          <>Paused. Not kept: {unsaved.map((u) => `${u.name} (${u.reason})`).join(', ')}.</>
        ) : (
          'Paused: its sandbox is gone, its files are kept.'
        ),
      );
      onChange();
    });
  const resume = () =>
    run('resume', async () => {
      await api.request('POST', path('resume'));
      setNote('Resumed in a new sandbox.');
      onChange();
    });
  const fork = () =>
    run('fork', async () => {
      const { sessions } = await api.request<SessionFork>('POST', path('fork'), { count: Number(count) });
      setNote(
        <>
          Forked into{' '}
          {sessions.map((s, i) => (
            <span key={s.id}>
              {i > 0 && ', '}
              {sessionLink(s.id)}
            </span>
          ))}
          .
        </>,
      );
      onChange();
    });
  const undo = () => {
    if (!confirm(`Bring the files of ${session.id} back to how they were before its last run?`)) return;
    void run('undo', async () => {
      const undone = await api.request<SessionUndo>('POST', path('undo'));
      setNote(
        <>
          Undid run{' '}
          <a href={href('runs', undone.undone_execution_id)}>
            <code>{undone.undone_execution_id}</code>
          </a>
          {undone.variables ? ' (files and variables)' : ' (files)'}; {undone.remaining} more can be undone.
        </>,
      );
      onChange();
    });
  };

  const label = (name: string, idle: string, going: string) => (busy === name ? going : idle);
  return (
    <div class="lifecycle" aria-label="lifecycle" role="group">
      <span class="row-actions">
        {paused ? (
          <button type="button" disabled={busy !== null} onClick={resume} aria-busy={busy === 'resume'}>
            {label('resume', 'Resume', 'Resuming…')}
          </button>
        ) : (
          <button type="button" disabled={busy !== null} onClick={pause} aria-busy={busy === 'pause'}>
            {label('pause', 'Pause', 'Pausing…')}
          </button>
        )}
        <label for="fork-count" class="sr-only">
          Copies
        </label>
        <select
          id="fork-count"
          value={count}
          onChange={(e) => setCount(e.currentTarget.value)}
          disabled={busy !== null}
        >
          {Array.from({ length: 10 }, (_, i) => (
            <option key={i} value={String(i + 1)}>
              {i + 1}×
            </option>
          ))}
        </select>
        <button type="button" disabled={busy !== null} onClick={fork} aria-busy={busy === 'fork'}>
          {label('fork', 'Fork', 'Forking…')}
        </button>
        {session.undo !== 'off' && (
          <button type="button" disabled={busy !== null} onClick={undo} aria-busy={busy === 'undo'}>
            {label('undo', 'Undo last run', 'Undoing…')}
          </button>
        )}
      </span>
      {note && !error && (
        <p class="muted" role="status">
          {note}
        </p>
      )}
      <ErrorNote error={error} />
    </div>
  );
}

/** A session's snapshots: taken by name, listed, restored (in place or into a new session) and deleted. */
export function SnapshotsPanel({
  session,
  refreshKey,
  onChange,
}: {
  session: Session;
  refreshKey: number;
  onChange(): void;
}) {
  const api = useApi();
  const [snapshots, setSnapshots] = useState<Snapshot[] | null>(null);
  const [name, setName] = useState('');
  const [listError, setListError] = useState<unknown>(null);
  const { busy, error, run } = useAction();
  const base = apiPath`/v1/sessions/${session.id}/snapshots`;
  const load = async () => {
    try {
      setSnapshots((await api.request<{ snapshots: Snapshot[] }>('GET', base)).snapshots);
      setListError(null);
    } catch (err) {
      setListError(err);
    }
  };
  useEffect(() => {
    void load();
  }, [session.id, refreshKey]);

  const take = (e: Event) => {
    e.preventDefault();
    void run('take', async () => {
      await api.request<Snapshot>('POST', base, { name });
      setName('');
      await load();
    });
  };
  const restore = (snap: string, intoNew: boolean) => {
    if (!intoNew && !confirm(`Roll ${session.id} back to the snapshot ${snap}? Its files since then are lost.`)) return;
    void run(`${intoNew ? 'new' : 'restore'}:${snap}`, async () => {
      const at = apiPath`/v1/sessions/${session.id}/snapshots/${snap}/restore`;
      const { session: made } = await api.request<SnapshotRestore>('POST', intoNew ? `${at}?into=new` : at);
      if (intoNew) navigate('sessions', made.id);
      else onChange();
    });
  };
  const remove = (snap: string) => {
    if (!confirm(`Delete the snapshot ${snap}?`)) return;
    void run(`delete:${snap}`, async () => {
      await api.request('DELETE', apiPath`/v1/sessions/${session.id}/snapshots/${snap}`);
      await load();
    });
  };

  return (
    <Panel title="Snapshots" label="snapshots">
      <form class="inline-form" onSubmit={take} aria-label="new snapshot">
        <label for="snapshot-name">Snapshot name</label>
        <input
          id="snapshot-name"
          required
          maxLength={63}
          pattern="[a-z0-9][a-z0-9_\-]{0,62}"
          title="lowercase letters, digits, _ and -"
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
        />
        <button type="submit" class="primary" disabled={busy !== null} aria-busy={busy === 'take'}>
          {busy === 'take' ? 'Taking…' : 'Take snapshot'}
        </button>
      </form>
      <ErrorNote error={error ?? listError} />
      <ListTable
        label="snapshots"
        columns={['Snapshot', 'Size', 'Holds', 'Taken']}
        actions
        items={snapshots}
        empty="No snapshots yet."
        row={(s) => (
          <tr key={s.name} data-snapshot={s.name}>
            <td>{s.name}</td>
            <td class="num">{bytes(s.size_bytes)}</td>
            <td>{s.variables ? 'files and variables' : 'files'}</td>
            <td>{time(s.created_at)}</td>
            <td>
              <span class="row-actions">
                <button
                  type="button"
                  disabled={busy !== null}
                  aria-label={`Restore ${s.name}`}
                  onClick={() => restore(s.name, false)}
                >
                  {busy === `restore:${s.name}` ? 'Restoring…' : 'Restore'}
                </button>
                <button
                  type="button"
                  disabled={busy !== null}
                  aria-label={`Restore ${s.name} into a new session`}
                  onClick={() => restore(s.name, true)}
                >
                  {busy === `new:${s.name}` ? 'Making…' : 'Into a new session'}
                </button>
                <button
                  type="button"
                  class="danger"
                  disabled={busy !== null}
                  aria-label={`Delete snapshot ${s.name}`}
                  onClick={() => remove(s.name)}
                >
                  Delete
                </button>
              </span>
            </td>
          </tr>
        )}
      />
    </Panel>
  );
}
