import { useState } from 'preact/hooks';
import type { StatsHistory } from '@sandgate/contracts';
import { useApi } from '../lib/context.ts';
import { ErrorNote, usePoll } from './common.tsx';
import { LineChart } from './line-chart.tsx';

const REFRESH_MS = 5000;

/** The deployment's last hour (GET /v1/system/stats/history): queue depth, runs per minute, pool hits, sessions. */
export function StatsHistoryCharts() {
  const api = useApi();
  const [history, setHistory] = useState<StatsHistory | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  usePoll(
    async () => {
      try {
        setHistory(await api.request<StatsHistory>('GET', '/v1/system/stats/history'));
        setProblem(null);
      } catch (err) {
        setProblem(err);
      }
    },
    REFRESH_MS,
    [],
  );
  if (!history) return <ErrorNote error={problem} />;
  const { points } = history;
  const times = points.map((p) => Date.parse(p.at) / 1000);
  // Pool hits per point: the counter's rise since the point before.
  const hits = points.map((p, i) => (i === 0 ? null : Math.max(0, p.pool_hits - points[i - 1]!.pool_hits)));
  return (
    <section class="card history" aria-label="last hour">
      <h3>last hour</h3>
      <ErrorNote error={problem} />
      <p class="muted" data-history-points={points.length}>
        {points.length} samples, one every {history.interval_seconds} s
      </p>
      <div class="charts">
        <LineChart
          name="queue"
          title="Queue depth"
          times={times}
          series={[
            { label: 'queued', stroke: '#2f7ed8', values: points.map((p) => p.queued) },
            { label: 'running', stroke: '#8e44ad', values: points.map((p) => p.running) },
          ]}
        />
        <LineChart
          name="runs-per-minute"
          title="Runs per minute"
          times={times}
          series={[{ label: 'runs/min', stroke: '#16a085', values: points.map((p) => p.runs_per_minute) }]}
        />
        <LineChart
          name="pool-hits"
          title="Pool hits"
          times={times}
          series={[{ label: 'hits', stroke: '#d35400', values: hits }]}
        />
        <LineChart
          name="live-sessions"
          title="Live sessions"
          times={times}
          series={[{ label: 'sessions', stroke: '#c0392b', values: points.map((p) => p.live_sessions) }]}
        />
      </div>
    </section>
  );
}
