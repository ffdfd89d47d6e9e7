import { href } from '../lib/router.ts';
import { Panel } from './common.tsx';
import { LiveRun } from './live-run.tsx';

/** One run's page: its stream tailed live (resumed across drops and reloads). */
export function RunPage({ id }: { id: string }) {
  return (
    <Panel
      title={
        <>
          Run <code>{id}</code>
        </>
      }
      label="run"
      actions={<a href={href('runs')}>All runs</a>}
    >
      <LiveRun id={id} />
    </Panel>
  );
}
