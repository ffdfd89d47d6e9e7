import type { Template } from '@sandgate/contracts';
import { useEffect, useState } from 'preact/hooks';
import { useApi } from '../lib/context.ts';
import { ErrorNote } from './common.tsx';

/**
 * The templates the tenant may use (GET /v1/templates), for a new session or a one-shot; only a ready one can be
 * chosen. Nothing is shown when the tenant has none: the runtime image is then the only choice.
 */
export function TemplatePicker({ id, value, onChange }: { id: string; value: string; onChange(name: string): void }) {
  const api = useApi();
  const [templates, setTemplates] = useState<Template[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    api.templates().then(setTemplates, (err: unknown) => {
      setTemplates([]);
      setError(err);
    });
  }, []);
  if (error) return <ErrorNote error={error} />;
  if (!templates || templates.length === 0) return null;
  return (
    <>
      <label for={id}>Template</label>
      <select id={id} value={value} onChange={(e) => onChange(e.currentTarget.value)}>
        <option value="">runtime image</option>
        {templates.map((t) => (
          <option key={t.name} value={t.name} disabled={t.state !== 'ready'}>
            {t.name}
            {t.description ? `: ${t.description}` : ''}
            {t.state === 'ready' ? '' : ` (${t.state})`}
          </option>
        ))}
      </select>
    </>
  );
}
