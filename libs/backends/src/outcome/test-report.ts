import type { ExecutionJob, TestCase, TestReport } from '@sandgate/contracts';
import { OutputCollector } from './output.ts';

/**
 * The start of each line sandgate-test's reporters write for one test or the summary (images/runtime/agent/
 * sandgate-test): a record separator, then a name with the execution id. The code under test could print one too, as
 * it runs in the test framework's process: test mode reports what that process says, as any test runner does.
 */
export const testMarker = (executionId: string): string => `\x1esandgate-test:${executionId}`;
/** Tests listed per result; the summary counts every one. */
export const MAX_TEST_RESULTS = 1_000;
/** A line longer than this is output, not a report (reporters cut errors to 2000 characters). */
const MAX_REPORT_LINE = 64 * 1024;

interface Summary {
  total: number;
  passed: number;
  failed: number;
  skipped: number;
}

/**
 * Test mode's stdout: report lines (see testMarker) become `test_result` events and the result's `tests`; everything
 * else is the run's output, collected and capped as always. Bytes are only held back while they might be a report.
 */
export class TestOutputCollector extends OutputCollector {
  readonly #marker: Buffer;
  readonly #onCase: (c: TestCase) => void;
  readonly #cases: TestCase[] = [];
  #counted: Summary = { total: 0, passed: 0, failed: 0, skipped: 0 };
  #summary: Summary | undefined;
  #errors: string[] = [];
  #pending: Buffer = Buffer.alloc(0);

  constructor(marker: string, forward: (text: string) => void, onCase: (c: TestCase) => void, maxBytes: number) {
    super(forward, maxBytes);
    this.#marker = Buffer.from(`${marker} `);
    this.#onCase = onCase;
  }

  override write(chunk: Uint8Array): void {
    let data = this.#pending.length > 0 ? Buffer.concat([this.#pending, chunk]) : Buffer.from(chunk);
    this.#pending = Buffer.alloc(0);
    while (data.length > 0) {
      const at = data.indexOf(this.#marker);
      if (at < 0) {
        // What could still become a marker stays back; the rest is output.
        const keep = partialMarkerAt(data, this.#marker);
        super.write(data.subarray(0, data.length - keep));
        this.#pending = Buffer.from(data.subarray(data.length - keep));
        return;
      }
      // A reporter may write while a line of output is open (pytest's progress dots): a report starts anywhere.
      if (at > 0) super.write(data.subarray(0, at));
      const nl = data.indexOf(10, at);
      if (nl < 0) {
        if (data.length - at > MAX_REPORT_LINE) {
          super.write(data.subarray(at));
          return;
        }
        this.#pending = Buffer.from(data.subarray(at));
        return;
      }
      const line = data.subarray(at, nl + 1);
      if (!this.#take(line.subarray(this.#marker.length, line.length - 1))) super.write(line);
      data = data.subarray(nl + 1);
    }
  }

  override end(): void {
    if (this.#pending.length > 0) super.write(this.#pending);
    this.#pending = Buffer.alloc(0);
    super.end();
  }

  /** The report, as the result carries it. */
  report(): TestReport {
    const summary = this.#summary ?? this.#counted;
    return {
      summary,
      results: this.#cases,
      ...(summary.total > this.#cases.length ? { results_truncated: true } : {}),
    };
  }

  /**
   * Why no test ran, when none did: the framework's own words (a syntax or import error while collecting the tests),
   * else `stderr`'s last lines (a test file that did not load), else that none was found.
   */
  notRun(stderr: string): string | undefined {
    if (this.report().summary.total > 0) return undefined;
    if (this.#errors.length > 0) return `The tests did not run: ${this.#errors.join('\n')}`;
    const told = stderr.trim();
    if (told !== '') return `The tests did not run: ${told.slice(-2000)}`;
    return 'No test ran: none was found.';
  }

  #take(json: Buffer): boolean {
    let value: unknown;
    try {
      value = JSON.parse(json.toString('utf8'));
    } catch {
      return false;
    }
    if (typeof value !== 'object' || value === null) return false;
    const v = value as Record<string, unknown>;
    if (typeof v.summary === 'object' && v.summary !== null) {
      const s = v.summary as Record<string, unknown>;
      const n = (k: string) => (Number.isSafeInteger(s[k]) && (s[k] as number) >= 0 ? (s[k] as number) : 0);
      this.#summary = { total: n('total'), passed: n('passed'), failed: n('failed'), skipped: n('skipped') };
      if (Array.isArray(v.errors)) this.#errors = v.errors.filter((e): e is string => typeof e === 'string');
      return true;
    }
    if (typeof v.name !== 'string' || typeof v.passed !== 'boolean') return false;
    const skipped = v.skipped === true;
    const c: TestCase = {
      name: v.name,
      passed: v.passed && !skipped,
      skipped,
      error: typeof v.error === 'string' ? v.error : null,
      duration_ms: typeof v.duration_ms === 'number' && v.duration_ms >= 0 ? v.duration_ms : 0,
    };
    const outcome = c.skipped ? 'skipped' : c.passed ? 'passed' : 'failed';
    this.#counted = { ...this.#counted, total: this.#counted.total + 1, [outcome]: this.#counted[outcome] + 1 };
    if (this.#cases.length < MAX_TEST_RESULTS) this.#cases.push(c);
    this.#onCase(c);
    return true;
  }
}

/** How many bytes at the end of `data` are the start of `marker` (a marker split across two reads). */
function partialMarkerAt(data: Buffer, marker: Buffer): number {
  for (let n = Math.min(marker.length - 1, data.length); n > 0; n--) {
    if (data.subarray(data.length - n).equals(marker.subarray(0, n))) return n;
  }
  return 0;
}

/** Test mode's program: sandgate-test in the runtime image, given the language, the marker, the code and the tests. */
export function testCommand(job: Pick<ExecutionJob, 'execution_id' | 'language' | 'code' | 'tests'>): string[] {
  return ['sandgate-test', job.language, testMarker(job.execution_id), job.code, job.tests ?? ''];
}
