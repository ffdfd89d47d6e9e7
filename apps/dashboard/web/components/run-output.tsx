import type { Artifact, ExecutionResult, TestCase } from '@sandgate/contracts';
import { useEffect, useRef } from 'preact/hooks';
import { sameOrigin } from '../lib/api.ts';
import { bytes, clock, duration } from '../lib/format.ts';
import type { RunView } from '../lib/run-view.ts';
import { AnsiText } from './ansi-text.tsx';
import { StateBadge } from './common.tsx';
import { FilePreview } from './file-preview.tsx';

export function PhaseTimeline({ phases }: { phases: RunView['phases'] }) {
  if (phases.length === 0) return <p class="muted">waiting for the first event…</p>;
  const t0 = Date.parse(phases[0]!.at);
  return (
    <ol class="timeline" aria-label="phases">
      {phases.map((p) => (
        <li key={p.phase + p.at} data-phase={p.phase}>
          <span class="phase">{p.phase}</span>
          <time dateTime={p.at} title={clock(p.at)}>
            +{duration(Date.parse(p.at) - t0)}
          </time>
        </li>
      ))}
    </ol>
  );
}

/** stdout and stderr in arrival order; follows the end while the reader is at the end. */
export function Console({ view, fallback }: { view: RunView; fallback?: ExecutionResult | null }) {
  const pre = useRef<HTMLPreElement>(null);
  const atEnd = useRef(true);
  useEffect(() => {
    if (atEnd.current && pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [view.output]);
  // A run whose events were not kept (or a view restored without them) still shows what the result holds.
  const output =
    view.output.length > 0 || !fallback
      ? view.output
      : [
          { stream: 'stdout' as const, text: fallback.stdout },
          { stream: 'stderr' as const, text: fallback.stderr },
        ];
  const empty = output.every((o) => o.text === '');
  return (
    <pre
      class="console"
      ref={pre}
      role="log"
      aria-label="output"
      tabIndex={0}
      onScroll={(e) => {
        const el = e.currentTarget;
        atEnd.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
      }}
    >
      {empty ? (
        <span class="muted">(no output yet)</span>
      ) : (
        output.map((o, i) => <AnsiText key={i} text={o.text} class={o.stream} />)
      )}
    </pre>
  );
}

export function ArtifactList({ artifacts }: { artifacts: Artifact[] }) {
  if (artifacts.length === 0) return null;
  return (
    <ul class="artifacts" aria-label="artifacts">
      {artifacts.map((a) => (
        <li key={a.path} class="artifact" data-path={a.path}>
          <div class="artifact-head">
            <strong>{a.path}</strong>
            <span class="muted">
              {a.mime_type}, {bytes(a.size_bytes)}
            </span>
            <code class="sha" title="sha256">
              {a.sha256.slice(0, 12)}
            </code>
            <a class="button" href={sameOrigin(a.download_url)} download={a.filename}>
              Download <span class="sr-only">{a.path}</span>
            </a>
          </div>
          <FilePreview url={a.download_url} name={a.filename} mime={a.mime_type} path={a.path} />
        </li>
      ))}
    </ul>
  );
}

export function ResultSummary({ result }: { result: ExecutionResult }) {
  return (
    <dl class="result" aria-label="result">
      <div>
        <dt>state</dt>
        <dd>
          <StateBadge state={result.state} />
        </dd>
      </div>
      <div>
        <dt>exit code</dt>
        <dd>{result.exit_code}</dd>
      </div>
      <div>
        <dt>duration</dt>
        <dd>{duration(result.duration_ms)}</dd>
      </div>
      {result.reason && (
        <div>
          <dt>reason</dt>
          <dd>{result.reason}</dd>
        </div>
      )}
      {result.message && (
        <div>
          <dt>message</dt>
          <dd>{result.message}</dd>
        </div>
      )}
      {result.value !== undefined && (
        <div class="value">
          <dt>value</dt>
          <dd>
            <code>{result.value}</code>
          </dd>
        </div>
      )}
      {result.interpreter_restarted && (
        <div>
          <dt>interpreter</dt>
          <dd>restarted for this run</dd>
        </div>
      )}
      {(result.stdout_truncated || result.stderr_truncated) && (
        <div>
          <dt>truncated</dt>
          <dd>
            {[result.stdout_truncated && 'stdout', result.stderr_truncated && 'stderr'].filter(Boolean).join(', ')}
          </dd>
        </div>
      )}
    </dl>
  );
}

/** Test mode: each test as it ends, and the counts once the run has. */
export function TestResults({ tests, result }: { tests: TestCase[]; result: ExecutionResult | null }) {
  const summary = result?.tests?.summary;
  if (tests.length === 0 && !summary) return null;
  return (
    <section class="tests" aria-label="tests">
      <h3>
        Tests
        {summary && (
          <span class="muted">
            {' '}
            {summary.passed} passed, {summary.failed} failed, {summary.skipped} skipped of {summary.total}
          </span>
        )}
      </h3>
      <table>
        <thead>
          <tr>
            <th scope="col">test</th>
            <th scope="col">outcome</th>
            <th scope="col">time</th>
            <th scope="col">error</th>
          </tr>
        </thead>
        <tbody>
          {tests.map((t, i) => {
            const outcome = t.skipped ? 'skipped' : t.passed ? 'passed' : 'failed';
            return (
              <tr key={`${i}-${t.name}`} data-outcome={outcome}>
                <td>
                  <code>{t.name}</code>
                </td>
                <td>{outcome}</td>
                <td>{duration(Math.round(t.duration_ms))}</td>
                <td>{t.error && <pre class="test-error">{t.error}</pre>}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
}

/** Everything about one run as it happens: phases, output, test results, artifacts, result. */
export function RunOutput({ view, fallback }: { view: RunView; fallback?: ExecutionResult | null }) {
  const result = view.result ?? fallback ?? null;
  const tests = view.tests?.length ? view.tests : (result?.tests?.results ?? []);
  return (
    <div class="run-output">
      <PhaseTimeline phases={view.phases} />
      <Console view={view} fallback={fallback} />
      <TestResults tests={tests} result={result} />
      <ArtifactList artifacts={view.artifacts.length ? view.artifacts : (fallback?.artifacts ?? [])} />
      {result && <ResultSummary result={result} />}
    </div>
  );
}
