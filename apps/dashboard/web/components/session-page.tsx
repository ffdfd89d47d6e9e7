import type { Execution, Session } from '@sandgate/contracts';
import { useState } from 'preact/hooks';
import { apiPath, sessionFiles } from '../lib/api.ts';
import { useApi } from '../lib/context.ts';
import { time } from '../lib/format.ts';
import { href, navigate } from '../lib/router.ts';
import { ErrorNote, LoadMore, Panel, StateBadge, usePaged, usePoll } from './common.tsx';
import { FilesPanel } from './files-panel.tsx';
import { RunForm } from './run-form.tsx';
import { RunsTable } from './runs-table.tsx';
import { LifecycleActions, SnapshotsPanel } from './session-lifecycle.tsx';
import { SessionActions } from './sessions-page.tsx';
import { TerminalPanel } from './terminal-panel.tsx';
import { MetricsPanel } from './metrics-panel.tsx';

/** One session: what it is, its files, a form to run code in it, and its runs. */
export function SessionPage({ id }: { id: string }) {
  const api = useApi();
  const [session, setSession] = useState<Session | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [filesChanged, setFilesChanged] = useState(0);
  const runs = usePaged<Execution>((cursor) => api.executions({ session_id: id }, cursor), [id]);
  const load = async () => {
    try {
      setSession(await api.request<Session>('GET', apiPath`/v1/sessions/${id}`));
      setError(null);
    } catch (err) {
      setError(err);
    }
    await runs.reload();
  };
  const { refresh } = usePoll(load, 4000, [id, runs.reload]);
  // A restore, an undo or a fork changes the files (and, for a restore in place, the snapshots' neighbours).
  const changed = () => {
    refresh();
    setFilesChanged((n) => n + 1);
  };
  if (!session)
    return (
      <Panel
        title={
          <>
            Session <code>{id}</code>
          </>
        }
        label="session"
      >
        {error ? <ErrorNote error={error} /> : <p>Loading…</p>}
      </Panel>
    );
  return (
    <>
      <Panel
        title={
          <>
            Session <code>{id}</code>
          </>
        }
        label="session"
        actions={<SessionActions session={session} onChange={changed} />}
      >
        <ErrorNote error={error} />
        <dl class="facts">
          <div>
            <dt>mode</dt>
            <dd>{session.mode}</dd>
          </div>
          <div>
            <dt>state</dt>
            <dd>
              <StateBadge state={session.state} />
            </dd>
          </div>
          <div>
            <dt>template</dt>
            <dd>{session.template ?? 'runtime image'}</dd>
          </div>
          <div>
            <dt>created</dt>
            <dd>{time(session.created_at)}</dd>
          </div>
          {session.paused_at ? (
            <div>
              <dt>paused</dt>
              <dd>{time(session.paused_at)}</dd>
            </div>
          ) : (
            session.pauses_at && (
              <div>
                <dt>pauses if idle at</dt>
                <dd>{time(session.pauses_at)}</dd>
              </div>
            )
          )}
          <div>
            <dt>deleted if unused at</dt>
            <dd>{time(session.expires_at)}</dd>
          </div>
          <div>
            <dt>undo</dt>
            <dd>{session.undo}</dd>
          </div>
          {session.forked_from && (
            <div>
              <dt>copy of</dt>
              <dd>
                <a href={href('sessions', session.forked_from)}>
                  <code>{session.forked_from}</code>
                </a>
              </dd>
            </div>
          )}
          {session.volumes.length > 0 && (
            <div>
              <dt>volumes</dt>
              <dd>
                <ul class="plain" aria-label="mounted volumes">
                  {session.volumes.map((v) => (
                    <li key={v.name}>
                      <a href={href('volumes', v.name)}>{v.name}</a> at <code>{v.path}</code>
                      {v.read_only ? ' (read-only)' : ''}
                    </li>
                  ))}
                </ul>
              </dd>
            </div>
          )}
          {session.current_execution_id && (
            <div>
              <dt>running</dt>
              <dd>
                <a href={href('runs', session.current_execution_id)}>
                  <code>{session.current_execution_id}</code>
                </a>
              </dd>
            </div>
          )}
        </dl>
        <LifecycleActions session={session} onChange={changed} />
        {error !== null && (
          <p>
            <button type="button" onClick={() => navigate('sessions')}>
              Back to sessions
            </button>
          </p>
        )}
      </Panel>
      <FilesPanel owner={sessionFiles(id)} refreshKey={filesChanged} events={`${sessionFiles(id)}/events`} />
      <MetricsPanel sessionId={id} />
      <TerminalPanel sessionId={id} />
      <SnapshotsPanel session={session} refreshKey={filesChanged} onChange={changed} />
      <Panel title="Run code" label="run code">
        <RunForm
          sessionId={id}
          onStarted={refresh}
          onEnded={() => {
            refresh();
            setFilesChanged((n) => n + 1);
          }}
        />
      </Panel>
      <Panel title="Runs in this session" label="session runs">
        <ErrorNote error={runs.error} />
        <RunsTable runs={runs.items} empty="No runs yet." showSession={false} />
        <LoadMore next={runs.next} onMore={runs.more} />
      </Panel>
    </>
  );
}
