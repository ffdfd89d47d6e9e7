// node:test reporter of sandgate's test mode (sandgate-test): one line per test as it ends, then a summary, each the
// marker (the test file's first argument) followed by JSON. Suites are not tests: a nested test is named by its
// suites and its own name, joined with " > ".
const marker = process.argv[2];
const MAX_ERROR = 2000;

const message = (error) => {
  const e = error?.cause ?? error;
  return String(e?.message ?? e ?? 'failed').slice(0, MAX_ERROR);
};

// node:test gives `skip: true` or the reason given, the same for `todo`.
const reason = (data) => {
  const why = data.skip ?? data.todo;
  return typeof why === 'string' && why !== '' ? why : null;
};

export default async function* sandgateReporter(source) {
  const path = [];
  const counts = { passed: 0, failed: 0, skipped: 0 };
  const line = (obj) => `${marker} ${JSON.stringify(obj)}\n`;
  for await (const event of source) {
    const data = event.data ?? {};
    if (event.type === 'test:start') {
      path[data.nesting] = data.name;
      path.length = data.nesting + 1;
      continue;
    }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    if (data.details?.type === 'suite') continue;
    const skipped = data.skip !== undefined || data.todo !== undefined;
    const passed = event.type === 'test:pass' && !skipped;
    const outcome = skipped ? 'skipped' : passed ? 'passed' : 'failed';
    counts[outcome] += 1;
    const name = [...path.slice(0, data.nesting), data.name].join(' > ');
    yield line({
      name,
      passed,
      skipped,
      error: outcome === 'failed' ? message(data.details?.error) : skipped ? reason(data) : null,
      duration_ms: Math.round((data.details?.duration_ms ?? 0) * 1000) / 1000,
    });
  }
  const total = counts.passed + counts.failed + counts.skipped;
  yield line({ summary: { total, ...counts }, errors: [] });
}
