import { useEffect, useState } from 'preact/hooks';
import type { Execution } from '@sandgate/contracts';
import { followEvents, type ConnectionState } from '../lib/event-stream.ts';
import { apiPath } from '../lib/api.ts';
import { useApi } from '../lib/context.ts';
import { applyEvent, emptyRunView, keepRunView, keptRunView, type RunView } from '../lib/run-view.ts';

export interface RunTail {
  execution: Execution | null;
  view: RunView;
  connection: { state: ConnectionState; reconnects: number };
  error: unknown;
}

/**
 * Tails one execution: its record, then its SSE stream folded into a RunView. The view is kept in
 * session storage as it grows, so a reload resumes after the last event shown (Last-Event-ID) instead
 * of starting over; a dropped connection resumes the same way.
 */
export function useRun(id: string | null): RunTail {
  const api = useApi();
  const [execution, setExecution] = useState<Execution | null>(null);
  const [view, setView] = useState<RunView>(emptyRunView);
  const [connection, setConnection] = useState<RunTail['connection']>({ state: 'connecting', reconnects: 0 });
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    if (!id) return;
    const ac = new AbortController();
    let current = keptRunView(id) ?? emptyRunView();
    let frame = 0;
    // Events come in bursts: render (and keep) at most once per animation frame.
    const flush = () => {
      frame = 0;
      setView(current);
      keepRunView(id, current);
    };
    setView(emptyRunView());
    setExecution(null);
    setError(null);
    (async () => {
      // Nothing kept is shown before the gateway confirms that this key may see the run.
      setExecution(await api.request<Execution>('GET', apiPath`/v1/executions/${id}`));
      setView(current);
      if (!current.result) {
        await followEvents(apiPath`/v1/executions/${id}/events`, {
          headers: () => api.headers(),
          after: current.lastEventId,
          signal: ac.signal,
          onEvent: (ev) => {
            current = applyEvent(current, ev);
            if (!frame) frame = requestAnimationFrame(flush);
          },
          onState: (state, reconnects) => setConnection({ state, reconnects }),
        });
      }
      if (ac.signal.aborted) return;
      cancelAnimationFrame(frame);
      flush();
      setConnection((c) => ({ ...c, state: 'ended' }));
      setExecution(await api.request<Execution>('GET', apiPath`/v1/executions/${id}`));
    })().catch((err: unknown) => {
      if (!ac.signal.aborted) setError(err);
    });
    return () => {
      ac.abort();
      cancelAnimationFrame(frame);
    };
  }, [id]);

  return { execution, view, connection, error };
}
