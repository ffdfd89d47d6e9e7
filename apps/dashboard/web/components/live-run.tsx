import { useEffect, useState } from 'preact/hooks';
import { isTerminalState } from '../lib/states.ts';
import { apiPath } from '../lib/api.ts';
import { useApi } from '../lib/context.ts';
import { href } from '../lib/router.ts';
import { ErrorNote, StateBadge } from './common.tsx';
import { RunOutput } from './run-output.tsx';
import { useRun } from './use-run.ts';

const CONNECTION_TEXT = {
  connecting: 'connecting…',
  open: 'live',
  reconnecting: 'reconnecting…',
  ended: 'ended',
} as const;

/** One run followed live: its state, the connection, a cancel button, and everything it reports. */
export function LiveRun({ id, compact = false, onEnded }: { id: string; compact?: boolean; onEnded?(): void }) {
  const api = useApi();
  const { execution, view, connection, error } = useRun(id);
  const [cancelling, setCancelling] = useState(false);
  const [cancelError, setCancelError] = useState<unknown>(null);
  const state =
    view.result?.state ??
    execution?.result?.state ??
    (view.phases.some((p) => p.phase === 'running') ? 'running' : (execution?.state ?? 'queued'));
  const ended = view.result !== null;
  useEffect(() => {
    if (ended) onEnded?.();
  }, [ended]);
  const cancel = async () => {
    setCancelling(true);
    setCancelError(null);
    try {
      await api.request('POST', apiPath`/v1/executions/${id}/cancel`);
    } catch (err) {
      setCancelError(err);
    }
    setCancelling(false);
  };
  return (
    <article class="live-run" data-execution={id} data-state={state} aria-busy={!isTerminalState(state)}>
      <header class="run-head">
        <StateBadge state={state} />
        {!compact && (
          <a href={href('runs', id)}>
            <code>{id}</code>
          </a>
        )}
        {execution && <span class="muted">{execution.language}</span>}
        {execution && !compact && (
          <span class="muted">
            in <a href={href('sessions', execution.session_id)}>{execution.session_id}</a>
          </span>
        )}
        <span class={`connection conn-${connection.state}`} data-reconnects={connection.reconnects} aria-live="polite">
          {CONNECTION_TEXT[connection.state]}
          {connection.reconnects > 0 ? ` (resumed ${connection.reconnects}×)` : ''}
        </span>
        {!isTerminalState(state) && (
          <button type="button" class="danger" onClick={cancel} disabled={cancelling}>
            {cancelling ? 'Cancelling…' : 'Cancel'}
          </button>
        )}
      </header>
      <ErrorNote error={error ?? cancelError} />
      <RunOutput view={view} fallback={execution?.result ?? null} />
    </article>
  );
}
