import type { Execution } from '@sandgate/contracts';
import { runDuration, time } from '../lib/format.ts';
import { href } from '../lib/router.ts';
import { ListTable, StateBadge } from './common.tsx';

/** Runs as rows: id, state, language, duration, session, creation time; `empty` when there are none. */
export function RunsTable({
  runs,
  empty,
  showSession = true,
}: {
  runs: Execution[] | null;
  empty: string;
  showSession?: boolean;
}) {
  return (
    <ListTable
      label="runs"
      columns={['Run', 'State', 'Language', 'Duration', ...(showSession ? ['Session'] : []), 'Created']}
      items={runs}
      empty={empty}
      row={(e) => (
        <tr key={e.id} data-execution={e.id} data-state={e.state}>
          <td>
            <a href={href('runs', e.id)}>
              <code>{e.id}</code>
            </a>
          </td>
          <td>
            <StateBadge state={e.state} />
          </td>
          <td>{e.language}</td>
          <td class="num">{runDuration(e)}</td>
          {showSession && (
            <td>
              <a href={href('sessions', e.session_id)}>
                <code>{e.session_id}</code>
              </a>
            </td>
          )}
          <td>{time(e.created_at)}</td>
        </tr>
      )}
    />
  );
}
