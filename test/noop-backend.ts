/**
 * A backend that does nothing, for tests and benches that measure or exercise sandgate's own path (HTTP, Redis
 * records, the queue, the worker's bookkeeping, events) without the engine. Imports nothing but types.
 */
import type { EventSink, ExecutionBackend, LiveSet } from '@sandgate/backends';
import type { ExecutionJob, ExecutionResult } from '@sandgate/contracts';

/** Reports the phases and the output a `print(1)` would, and completes at once. */
export const noopBackend: ExecutionBackend = {
  name: 'noop',
  capabilities: { sandboxes: ['oneshot', 'session', 'stateful'], warmPool: false, gvisor: false, services: false },
  async execute(_job: ExecutionJob, events: EventSink): Promise<ExecutionResult> {
    events.phase('starting');
    events.phase('running');
    events.stdout('1\n');
    events.phase('harvesting');
    return {
      state: 'completed',
      exit_code: 0,
      stdout: '1\n',
      stderr: '',
      stdout_truncated: false,
      stderr_truncated: false,
      artifacts: [],
      duration_ms: 0,
    };
  },
  async sweep(_live: LiveSet) {
    return { removed: [] };
  },
  async check() {},
  async close() {},
};
