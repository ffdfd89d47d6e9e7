import { useState } from 'preact/hooks';
import type { SystemStats } from '@sandgate/contracts';
import { ApiError } from '../lib/api.ts';
import { useApi } from '../lib/context.ts';
import { clock, duration } from '../lib/format.ts';
import { ErrorNote, Panel, StateBadge, usePoll } from './common.tsx';
import { StatsHistoryCharts } from './stats-history.tsx';

const REFRESH_MS = 2000;

function Figures({ title, values }: { title: string; values: Record<string, number> }) {
  return (
    <section class="card figures" aria-label={title}>
      <h3>{title}</h3>
      <dl>
        {Object.entries(values).map(([k, v]) => (
          <div key={k} data-figure={`${title}.${k}`}>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </div>
        ))}
      </dl>
    </section>
  );
}

/** What the deployment is doing, refreshed every two seconds: queue, runs by state, pool, sessions, workers. */
export function OperatorPage() {
  const api = useApi();
  const [stats, setStats] = useState<SystemStats | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  usePoll(
    async () => {
      try {
        setStats(await api.request<SystemStats>('GET', '/v1/system/stats'));
        setProblem(null);
      } catch (err) {
        setProblem(err);
      }
    },
    REFRESH_MS,
    [],
  );
  if (problem instanceof ApiError && problem.status === 404) {
    return (
      <Panel title="Operator" label="operator">
        <p class="notice" role="status">
          Operator view unavailable: this gateway does not serve /v1/system/stats.
        </p>
      </Panel>
    );
  }
  if (problem instanceof ApiError && problem.status === 403) {
    return (
      <Panel title="Operator" label="operator">
        <p class="notice" role="status">
          The operator view needs an operator key (SANDGATE_OPERATOR_KEYS).
        </p>
      </Panel>
    );
  }
  const lookups = stats ? stats.pool.hits + stats.pool.misses : 0;
  return (
    <Panel
      title="Operator"
      label="operator"
      actions={
        stats && (
          <span class="muted" aria-live="off">
            updated {clock(stats.generated_at)}
          </span>
        )
      }
    >
      <ErrorNote error={problem} />
      {!stats && !problem && <p>Loading…</p>}
      {stats && (
        <div class="grid">
          <Figures title="queue" values={stats.queue} />
          <Figures title="runs" values={stats.executions} />
          <Figures
            title="pool"
            values={{
              hits: stats.pool.hits,
              misses: stats.pool.misses,
              reused: stats.pool.reused,
              ready: stats.pool.ready,
              'hit rate %': lookups ? Math.round((100 * stats.pool.hits) / lookups) : 0,
            }}
          />
          {Object.entries(stats.pool.templates).map(([name, t]) => (
            <Figures key={name} title={`pool: ${name}`} values={t} />
          ))}
          <Figures title="sessions" values={{ ...stats.sessions, 'SSE subscribers': stats.sse_subscribers }} />
          <section class="card workers" aria-label="workers">
            <h3>workers</h3>
            {stats.workers.length === 0 && <p class="error">No live worker.</p>}
            {stats.workers.length > 0 && stats.workers.every((w) => w.backend.state !== 'usable') && (
              <p class="error">
                No worker's backend is usable: /readyz answers 503, and runs end in error (backend_unavailable).
              </p>
            )}
            {stats.workers.length > 0 && (
              <table class="list">
                <thead>
                  <tr>
                    <th scope="col">Worker</th>
                    <th scope="col">Heartbeat</th>
                    <th scope="col">Running</th>
                    <th scope="col">Backend</th>
                  </tr>
                </thead>
                <tbody>
                  {stats.workers.map((w) => (
                    <tr key={w.id} data-worker={w.id}>
                      <td>
                        <code>{w.id}</code>
                      </td>
                      <td>
                        {duration(Math.max(0, Date.parse(stats.generated_at) - Date.parse(w.last_heartbeat_at)))} ago
                      </td>
                      <td class="num">
                        {w.running} / {w.concurrency}
                      </td>
                      <td data-backend-state={w.backend.state}>
                        {w.backend.name || 'backend'} <StateBadge state={w.backend.state} />
                        {w.backend.reason && <div class="reason">{w.backend.reason}</div>}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </section>
          <StatsHistoryCharts />
        </div>
      )}
    </Panel>
  );
}
