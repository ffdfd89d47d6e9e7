// A test reporter for Node's runner that prints, after the run, how long each test file took (from the runner
// taking it to its end, start-up included; with files run concurrently, their times overlap), the slowest first,
// and the total. Used by scripts/run-tests.sh next to
// the spec reporter; SANDGATE_TEST_TIMES=<path> also writes every file's time as TSV (seconds, tests, file).
import { writeFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';

const SHOWN = 15;

// scripts/run-tests.sh runs compiled copies of the test files (BUILD_DIR/<source>.mjs): the runner reports a file by
// the copy's path, and a test in it by the source's (through the source map). Both name the source here.
const built = process.env.SANDGATE_TEST_BUILD_DIR && resolve(process.env.SANDGATE_TEST_BUILD_DIR);
const sourceOf = (file) =>
  built && file.startsWith(`${built}/`)
    ? file.slice(built.length + 1).replace(/\.mjs$/, '')
    : relative(process.cwd(), file);

export default async function* fileTimes(source) {
  const started = Date.now();
  const files = new Map(); // source file → { start, end, tests }
  let last; // the file the runner took last: a test declared in a helper module counts for it
  for await (const { type, data } of source) {
    if (!data?.file) continue;
    const file = sourceOf(data.file);
    // The runner reports each file as a test named by its path (absolute on Node 20, relative from Node 22).
    if (typeof data.name === 'string' && (data.name === data.file || resolve(data.name) === data.file)) {
      if (type === 'test:dequeue') {
        last = { start: Date.now(), end: undefined, tests: 0 };
        files.set(file, last);
      } else if (type === 'test:complete' && files.has(file)) {
        files.get(file).end = Date.now();
      }
    } else if ((type === 'test:pass' || type === 'test:fail') && data.nesting === 0) {
      const entry = files.get(file) ?? last;
      if (entry) entry.tests += 1;
    }
  }
  const rows = [...files.entries()].map(([file, { start, end, tests }]) => ({
    file,
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
