import type { Execution } from '@sandgate/contracts';
import { useState } from 'preact/hooks';
import { useApi } from '../lib/context.ts';
import { EXECUTION_STATES } from '../lib/states.ts';
import { ErrorNote, LoadMore, Panel, usePaged, usePoll } from './common.tsx';
import { RunsTable } from './runs-table.tsx';

/** Recent runs of the tenant, newest first, filtered by state, refreshed live. */
export function RunsPage() {
  const api = useApi();
  const [state, setState] = useState('');
  const list = usePaged<Execution>((cursor) => api.executions({ state }, cursor), [state]);
  usePoll(list.reload, 3000, [list.reload]);
  return (
    <Panel
      title="Runs"
      label="runs"
      actions={
        <label class="inline-form">
          State
          <select value={state} onChange={(e) => setState(e.currentTarget.value)} aria-label="filter by state">
            <option value="">all</option>
            {EXECUTION_STATES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
      }
    >
      <ErrorNote error={list.error} />
      <RunsTable runs={list.items} empty={state ? `No ${state} runs.` : 'No runs.'} />
      <LoadMore next={list.next} onMore={list.more} />
    </Panel>
  );
}
