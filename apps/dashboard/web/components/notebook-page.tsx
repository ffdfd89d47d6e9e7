import type { Execution, Session } from '@sandgate/contracts';
import { useEffect, useRef, useState } from 'preact/hooks';
import { apiPath } from '../lib/api.ts';
import { useApi } from '../lib/context.ts';
import { href } from '../lib/router.ts';
import { ErrorNote, Panel, StateBadge } from './common.tsx';
import { CodeEditor } from './code-editor.tsx';
import { ArtifactList, Console } from './run-output.tsx';
import { useRun } from './use-run.ts';

interface Cell {
  key: number;
  code: string;
  executionId: string | null;
  count: number | null;
}

const storageKey = (id: string) => `sandgate.notebook.${id}`;
const loadCells = (id: string): Cell[] => {
  try {
    return JSON.parse(sessionStorage.getItem(storageKey(id)) ?? '[]') as Cell[];
  } catch {
    return [];
  }
};
const newCell = (cells: Cell[]): Cell => ({
  key: Math.max(0, ...cells.map((c) => c.key)) + 1,
  code: '',
  executionId: null,
  count: null,
});

function CellOutput({ id }: { id: string }) {
  const { execution, view, error } = useRun(id);
  const result = view.result ?? execution?.result ?? null;
  const printed = view.output.some((o) => o.text !== '') || Boolean(result && (result.stdout || result.stderr));
  return (
    <div class="cell-output" data-execution={id} data-state={result?.state ?? 'running'}>
      <ErrorNote error={error} />
      {printed && <Console view={view} fallback={execution?.result ?? null} />}
      {result?.value !== undefined && (
        <pre class="cell-value" aria-label="value">
          {result.value}
        </pre>
      )}
      <ArtifactList artifacts={view.artifacts} />
      {result && result.state !== 'completed' && (
        <p class="cell-status">
          <StateBadge state={result.state} /> {result.message ?? result.reason ?? `exit code ${result.exit_code}`}
        </p>
      )}
      {result?.interpreter_restarted && <p class="muted">The interpreter was (re)started for this cell.</p>}
    </div>
  );
}

/**
 * A stateful session as a notebook: each cell is a run in the session's live interpreter, so variables
 * carry from cell to cell. Shift+Enter runs a cell and moves to the next. The cells' code is kept in
 * this tab's session storage (the API keeps runs, not their code).
 */
export function NotebookPage({ id }: { id: string }) {
  const api = useApi();
  const [session, setSession] = useState<Session | null>(null);
  const [cells, setCells] = useState<Cell[]>(() => {
    const c = loadCells(id);
    return c.length ? c : [newCell([])];
  });
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [focusKey, setFocusKey] = useState<number | null>(null);
  // The editors' text as typed: a Shift+Enter may come before the state update of the last keystroke renders.
  const typed = useRef(new Map<number, string>());
  useEffect(() => {
    api.request<Session>('GET', apiPath`/v1/sessions/${id}`).then(setSession, setError);
  }, [id]);
  useEffect(() => {
    sessionStorage.setItem(storageKey(id), JSON.stringify(cells));
  }, [cells]);
  useEffect(() => {
    if (focusKey === null) return;
    document
      .querySelector(`[data-cell="${focusKey}"] .editor`)
      ?.shadowRoot?.querySelector<HTMLElement>('.cm-content')
      ?.focus();
  }, [focusKey, cells]);

  const patch = (key: number, p: Partial<Cell>) =>
    setCells((list) => list.map((c) => (c.key === key ? { ...c, ...p } : c)));
  const run = async (cell: Cell) => {
    setError(null);
    try {
      const code = typed.current.get(cell.key) ?? cell.code;
      const exec = await api.request<Execution>('POST', '/v1/executions', { session_id: id, language: 'python', code });
      setCells((list) => {
        const count = Math.max(0, ...list.map((c) => c.count ?? 0)) + 1;
        const next = list.map((c) => (c.key === cell.key ? { ...c, executionId: exec.id, count } : c));
        const i = next.findIndex((c) => c.key === cell.key);
        if (i === next.length - 1) next.push(newCell(next));
        setFocusKey(next[i + 1]!.key);
        return next;
      });
    } catch (err) {
      setError(err);
    }
  };
  const restart = async () => {
    setError(null);
    try {
      await api.request('POST', apiPath`/v1/sessions/${id}/restart`);
      setNotice('Interpreter restarted: variables are gone, files stay.');
    } catch (err) {
      setError(err);
    }
  };
  if (session && session.mode !== 'stateful') {
    return (
      <Panel title="Notebook" label="notebook">
        <p>
          {id} is a process session. <a href={href('sessions', id)}>Open it</a>.
        </p>
      </Panel>
    );
  }
  return (
    <Panel
      title={
        <>
          Notebook <code>{id}</code>
        </>
      }
      label="notebook"
      actions={
        <>
          <a class="button" href={href('sessions', id)}>
            Files
          </a>
          <button type="button" onClick={restart}>
            Restart interpreter
          </button>
          <button type="button" onClick={() => setCells((l) => [...l, newCell(l)])}>
            Add cell
          </button>
        </>
      }
    >
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      <ErrorNote error={error} />
      <ol class="cells">
        {cells.map((cell) => (
          <li key={cell.key} class="cell" data-cell={cell.key}>
            <div class="cell-input">
              <span class="cell-count" aria-hidden="true">
                [{cell.count ?? ' '}]
              </span>
              <CodeEditor
                value={cell.code}
                language="python"
                label={`cell ${cell.key}`}
                onChange={(code) => {
                  typed.current.set(cell.key, code);
                  patch(cell.key, { code });
                }}
                onRun={() => void run(cell)}
              />
              <button type="button" onClick={() => void run(cell)} aria-label={`Run cell ${cell.key}`}>
                Run
              </button>
            </div>
            {cell.executionId && <CellOutput key={cell.executionId} id={cell.executionId} />}
          </li>
        ))}
      </ol>
    </Panel>
  );
}
