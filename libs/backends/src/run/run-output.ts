import type { ExecutionJob } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import { OutputCollector } from '../outcome/output.ts';
import { TestOutputCollector, testMarker } from '../outcome/test-report.ts';

/**
 * A run's two collectors, each forwarding what it keeps to `events` as it arrives. In test mode stdout also carries
 * the test reports (`tests`), which become `test_result` events.
 */
export function runOutput(
  events: EventSink,
  maxBytes: number,
  job?: Pick<ExecutionJob, 'execution_id' | 'mode'>,
): { stdout: OutputCollector; stderr: OutputCollector; tests?: TestOutputCollector } {
  const stderr = new OutputCollector((text) => events.stderr(text), maxBytes);
  if (job?.mode === 'test') {
    const tests = new TestOutputCollector(
      testMarker(job.execution_id),
      (text) => events.stdout(text),
      (c) => events.testResult?.(c),
      maxBytes,
    );
    return { stdout: tests, stderr, tests };
  }
  return { stdout: new OutputCollector((text) => events.stdout(text), maxBytes), stderr };
}
