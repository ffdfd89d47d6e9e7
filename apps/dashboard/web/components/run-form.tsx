import type { Execution, Session } from '@sandgate/contracts';
import { useEffect, useState } from 'preact/hooks';
import { useApi } from '../lib/context.ts';
import { ErrorNote } from './common.tsx';
import { CodeEditor } from './code-editor.tsx';
import { LiveRun } from './live-run.tsx';
import { TemplatePicker } from './template-picker.tsx';

interface Runtimes {
  runtimes: { language: string }[];
  limits: { max_timeout_ms: number; memory_mb: number; cpus: number };
}

const EXAMPLES: Record<string, string> = {
  python: 'print("hello from the sandbox")\n',
  javascript: 'console.log("hello from the sandbox")\n',
  typescript: 'const where: string = "the sandbox";\nconsole.log(`hello from ${where}`);\n',
  bash: 'echo "hello from the sandbox"\n',
};

/**
 * Runs code: language, editor, timeout and limits, and (without a fixed session) a session picker and, for a
 * one-shot, a template picker;
 * the run then streams below the form. Shift+Enter or Ctrl+Enter in the editor runs it.
 */
export function RunForm({
  sessionId,
  onStarted,
  onEnded,
}: {
  sessionId?: string;
  onStarted?(e: Execution): void;
  onEnded?(): void;
}) {
  const api = useApi();
  const [runtimes, setRuntimes] = useState<Runtimes | null>(null);
  const [sessions, setSessions] = useState<Session[]>([]);
  const [target, setTarget] = useState(sessionId ?? '');
  const [template, setTemplate] = useState('');
  const [language, setLanguage] = useState('python');
  const [code, setCode] = useState(EXAMPLES.python!);
  const [timeoutS, setTimeoutS] = useState('');
  const [memoryMb, setMemoryMb] = useState('');
  const [cpus, setCpus] = useState('');
  const [running, setRunning] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    api.request<Runtimes>('GET', '/v1/runtimes').then(setRuntimes, setError);
    if (!sessionId)
      api.sessions().then(
        (p) => setSessions(p.items),
        () => {},
      );
  }, [sessionId]);

  const submit = async (e?: Event) => {
    e?.preventDefault();
    setError(null);
    const limits = { ...(memoryMb ? { memory_mb: Number(memoryMb) } : {}), ...(cpus ? { cpus: Number(cpus) } : {}) };
    try {
      const exec = await api.request<Execution>('POST', '/v1/executions', {
        language,
        code,
        // A one-shot names its template; a session's runs use the one it was made with.
        ...(target ? { session_id: target } : template ? { template } : {}),
        ...(timeoutS ? { timeout_ms: Math.round(Number(timeoutS) * 1000) } : {}),
        ...(Object.keys(limits).length ? { limits } : {}),
      });
      setRunning(exec.id);
      onStarted?.(exec);
    } catch (err) {
      setError(err);
    }
  };
  const max = runtimes?.limits;
  return (
    <div class="run-form">
      <form onSubmit={submit} aria-label="run code">
        <div class="fields">
          {!sessionId && (
            <label>
              Session
              <select value={target} onChange={(e) => setTarget(e.currentTarget.value)}>
                <option value="">new session (one-shot)</option>
                {sessions.map((s) => (
                  <option key={s.id} value={s.id}>
                    {s.id} ({s.mode})
                  </option>
                ))}
              </select>
            </label>
          )}
          {!sessionId && !target && <TemplatePicker id="run-template" value={template} onChange={setTemplate} />}
          <label>
            Language
            <select
              value={language}
              onChange={(e) => {
                const next = e.currentTarget.value;
                if (code === EXAMPLES[language]) setCode(EXAMPLES[next] ?? '');
                setLanguage(next);
              }}
            >
              {(runtimes?.runtimes ?? [{ language: 'python' }]).map((r) => (
                <option key={r.language}>{r.language}</option>
              ))}
            </select>
          </label>
          <label>
            Timeout (s)
            <input
              type="number"
              min={0.1}
              step="any"
              max={max ? max.max_timeout_ms / 1000 : undefined}
              value={timeoutS}
              placeholder={max ? String(max.max_timeout_ms / 1000) : ''}
              onInput={(e) => setTimeoutS(e.currentTarget.value)}
            />
          </label>
          <label>
            Memory (MB)
            <input
              type="number"
              min={16}
              max={max?.memory_mb}
              value={memoryMb}
              placeholder={max ? String(max.memory_mb) : ''}
              onInput={(e) => setMemoryMb(e.currentTarget.value)}
            />
          </label>
          <label>
            CPUs
            <input
              type="number"
              min={0.1}
              step="any"
              max={max?.cpus}
              value={cpus}
              placeholder={max ? String(max.cpus) : ''}
              onInput={(e) => setCpus(e.currentTarget.value)}
            />
          </label>
        </div>
        <CodeEditor value={code} language={language} onChange={setCode} onRun={() => void submit()} label="code" />
        <p class="form-actions">
          <button type="submit" class="primary">
            Run
          </button>
          <span class="muted">Shift+Enter in the editor runs too.</span>
        </p>
        <ErrorNote error={error} />
      </form>
      {running && <LiveRun key={running} id={running} onEnded={onEnded} />}
    </div>
  );
}
