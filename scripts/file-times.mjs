// A test reporter for Node's runner that prints, after the run, how long each test file took (from the runner
// taking it to its end, start-up included; with files run concurrently, their times overlap), the slowest first,
// and the total. Used by scripts/run-tests.sh next to
// the spec reporter; SANDGATE_TEST_TIMES=<path> also writes every file's time as TSV (seconds, tests, file).
import { writeFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';

const SHOWN = 15;

export default async function* fileTimes(source) {
  const started = Date.now();
  const files = new Map(); // file → { start, end, tests }
  let last; // the file the runner took last: a test declared in a helper module counts for it
  for await (const { type, data } of source) {
    if (!data?.file) continue;
    // The runner reports each file as a test named by its path (absolute on Node 20, relative from Node 22).
    if (typeof data.name === 'string' && (data.name === data.file || resolve(data.name) === data.file)) {
      if (type === 'test:dequeue') {
        last = { start: Date.now(), end: undefined, tests: 0 };
        files.set(data.file, last);
      } else if (type === 'test:complete' && files.has(data.file)) {
        files.get(data.file).end = Date.now();
      }
    } else if ((type === 'test:pass' || type === 'test:fail') && data.nesting === 0) {
      const entry = files.get(data.file) ?? last;
      if (entry) entry.tests += 1;
    }
  }
  const rows = [...files.entries()].map(([file, { start, end, tests }]) => ({
    file: relative(process.cwd(), file),
    seconds: ((end ?? Date.now()) - start) / 1000,
    tests,
  }));
  if (process.env.SANDGATE_TEST_TIMES) {
    writeFileSync(process.env.SANDGATE_TEST_TIMES, rows.map((r) => `${r.seconds}\t${r.tests}\t${r.file}\n`).join(''));
  }
  const total = (Date.now() - started) / 1000;
  yield `\n==> ${rows.length} files in ${total.toFixed(0)} s; the slowest:\n`;
  for (const r of [...rows].sort((a, b) => b.seconds - a.seconds).slice(0, SHOWN)) {
    yield `  ${r.seconds.toFixed(1).padStart(7)} s  ${String(r.tests).padStart(3)} tests  ${r.file}\n`;
  }
}
