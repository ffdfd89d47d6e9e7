import { Panel } from './common.tsx';
import { RunForm } from './run-form.tsx';

export function NewRunPage() {
  return (
    <Panel title="New run" label="new run">
      <RunForm />
    </Panel>
  );
}
