import { EventSourceParserStream } from 'eventsource-parser/stream';
import { useEffect, useState } from 'preact/hooks';
import type { SessionMetrics } from '@sandgate/contracts';
import { ApiError, apiPath } from '../lib/api.ts';
import { useApi } from '../lib/context.ts';
import { bytes } from '../lib/format.ts';
import { ErrorNote, Panel } from './common.tsx';
import { LineChart } from './line-chart.tsx';

/** How many samples (about a second each) the charts keep: five minutes. */
const KEEP = 300;
const RETRY_MS = 2000;

/** Figures of the session's sandbox, live from its metrics stream, drawn over the last five minutes. */
export function MetricsPanel({ sessionId }: { sessionId: string }) {
  const api = useApi();
  const [samples, setSamples] = useState<SessionMetrics[]>([]);
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    const ac = new AbortController();
    setSamples([]);
    void (async () => {
      while (!ac.signal.aborted) {
        try {
          const res = await fetch(apiPath`/v1/sessions/${sessionId}/metrics/stream`, {
            headers: { accept: 'text/event-stream', ...api.headers() },
            signal: ac.signal,
            cache: 'no-store',
          });
          if (!res.ok || !res.body) {
            const body = (await res.json().catch(() => null)) as { code?: string; detail?: string } | null;
            throw new ApiError(res.status, body?.code ?? `http_${res.status}`, body?.detail ?? 'no metrics');
          }
          setError(null);
          const reader = res.body
            .pipeThrough(new TextDecoderStream())
            .pipeThrough(new EventSourceParserStream())
            .getReader();
          for (;;) {
            const { done, value } = await reader.read();
            if (done || value.event === 'end') return;
            if (value.event !== 'metrics') continue;
            const m = JSON.parse(value.data) as SessionMetrics;
            setSamples((all) => [...all.slice(-(KEEP - 1)), m]);
          }
        } catch (err) {
          if (ac.signal.aborted) return;
          setError(err);
          // A session that is gone, or a key that may not see it, is not retried.
          if (err instanceof ApiError && (err.status === 404 || err.status === 401 || err.status === 403)) return;
        }
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    })();
    return () => ac.abort();
  }, [sessionId]);

  const last = samples.at(-1);
  const times = samples.map((m) => Date.parse(m.sampled_at) / 1000);
  const mib = (n: number | null) => (n === null ? null : n / (1 << 20));
  const figures: [string, string, string][] = last
    ? [
        ['sandbox', 'sandbox', last.sandbox ? 'up' : `none (${last.state})`],
        ['cpu_percent', 'CPU', last.cpu_percent === null ? '–' : `${last.cpu_percent.toFixed(1)} %`],
        [
          'memory',
          'memory',
          last.memory_bytes === null
            ? '–'
            : `${bytes(last.memory_bytes)}${last.memory_limit_bytes ? ` of ${bytes(last.memory_limit_bytes)}` : ''}`,
        ],
        [
          'disk',
          'disk',
          `${bytes(last.disk_bytes)}${last.disk_limit_bytes ? ` of ${bytes(last.disk_limit_bytes)}` : ''}`,
        ],
        ['pids', 'processes', last.pids === null ? '–' : String(last.pids)],
      ]
    : [];
  return (
    <Panel title="Metrics" label="metrics">
      <ErrorNote error={error} />
      {!last && !error && <p>Waiting for the first sample…</p>}
      {last && (
        <>
          <dl class="figures-inline">
            {figures.map(([key, label, text]) => (
              <div key={key} data-metric={key}>
                <dt>{label}</dt>
                <dd>{text}</dd>
              </div>
            ))}
          </dl>
          <div class="charts">
            <LineChart
              name="cpu"
              title="CPU %"
              times={times}
              series={[{ label: 'CPU %', stroke: '#2f7ed8', values: samples.map((m) => m.cpu_percent) }]}
            />
            <LineChart
              name="memory"
              title="Memory (MiB)"
              times={times}
              yRange={mib(last.memory_limit_bytes)}
              series={[{ label: 'memory', stroke: '#8e44ad', values: samples.map((m) => mib(m.memory_bytes)) }]}
            />
            <LineChart
              name="disk"
              title="Disk (MiB)"
              times={times}
              yRange={mib(last.disk_limit_bytes)}
              series={[{ label: 'disk', stroke: '#16a085', values: samples.map((m) => mib(m.disk_bytes)) }]}
            />
            <LineChart
              name="pids"
              title="Processes"
              times={times}
              series={[{ label: 'processes', stroke: '#d35400', values: samples.map((m) => m.pids) }]}
            />
          </div>
        </>
      )}
    </Panel>
  );
}
