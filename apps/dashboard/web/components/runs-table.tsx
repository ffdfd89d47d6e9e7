import type { Execution } from '@sandgate/contracts';
import { runDuration, time } from '../lib/format.ts';
import { href } from '../lib/router.ts';
import { StateBadge } from './common.tsx';

/** Runs as rows: id, state, language, duration, session, creation time. */
export function RunsTable({ runs, showSession = true }: { runs: Execution[]; showSession?: boolean }) {
  return (
    <div class="table-scroll">
      <table class="list" aria-label="runs">
        <thead>
          <tr>
            <th scope="col">Run</th>
            <th scope="col">State</th>
            <th scope="col">Language</th>
            <th scope="col">Duration</th>
            {showSession && <th scope="col">Session</th>}
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {runs.map((e) => (
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
          ))}
        </tbody>
      </table>
    </div>
  );
}
