/**
 * `npm run bench:ci`: the hot paths against the budgets in bench/budgets.json; exits 1 when one is exceeded.
 *
 * Four paths, each measured by its bench (a process of its own) in the configuration a deployment runs: API keys on
 * (BENCH_API_KEYS=1), rate limits and tenant quotas counted, and the data directory on the quick start's btrfs disk
 * with per-session quotas (a directory of its own under /var/lib/sandgate, removed afterwards):
 *   gateway-overhead   the accept path (`?wait`), no-op backend; baseline: a bare BullMQ queue behind node:http
 *   http-stateful      `x + 1` in a stateful session; baseline: raw `docker exec`
 *   http-oneshot-pool  a pooled one-shot `print(1)`; baseline: raw `docker exec`
 *   http-oneshot-cold  the cold path; baseline: a raw cold container through the engine API
 * Each baseline run is interleaved with sandgate's samples, so a busy minute hits both alike. Budgets are CPU ms per
 * execution (normalized to the machine's speed, bench/lib/speed.ts) or ratios to those baselines, never a latency.
 * A bench whose figures miss a budget (or fail to measure) runs once more; a check fails CI only if it fails both
 * times. Figures and check results are JSON lines on stdout (BENCH_OUT=file: also there); the table goes to stderr.
 *
 * Environment: BENCH_DATA_PARENT (default SANDGATE_DATA_DIR or /var/lib/sandgate; must be btrfs with quotas),
 * BENCH_CI_BUDGETS (default bench/budgets.json), BENCH_CI_ONLY=file,file (a subset of the benches),
 * BENCH_CI_REPORT_ONLY=1 (measure and print, never fail: for comparing two trees).
 */
import { randomBytes } from 'node:crypto';
import { appendFile, chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SubvolumeQuota } from '@sandgate/storage';
import { watchContention, type Contention } from './lib/contention.ts';
import { machine } from './lib/machine.ts';
import { forwardSignals, isInterrupted, startBench, type BenchRun, type Fig } from './lib/run-bench.ts';
import { ROOT } from './lib/stack.ts';
import { round } from './lib/stats.ts';

interface Check {
  id: string;
  /** The bench figure (its `bench` field) and the key of it that is checked. */
  figure: string;
  key: string;
  /** What the line of the table says. */
  what: string;
  unit: string;
  /** The budget: the figure must stay at or below `max`, or at or above `min`. */
  max?: number;
  min?: number;
  /** A key of the same figure shown beside it (the baseline it was compared with). */
  baseline_key?: string;
  /** What the budget was set from (the runs' figures), for the reader. */
  set_from?: string;
}

interface Budgets {
  checks: Check[];
}

/**
 * What each bench is asked to do here. Sample counts are what a quiet machine measures in a few seconds; on a busy one
 * each figure stops sampling after BENCH_SAMPLE_S seconds (with at least a quarter of them), so that the whole run
 * stays within about three minutes at any load.
 */
const PLAN: { file: string; figures: string[]; env: Record<string, string> }[] = [
  {
    file: 'gateway-overhead',
    figures: ['gateway-overhead'],
    env: { BENCH_FIGURES: 'gateway-overhead', BENCH_N: '50', BENCH_SAMPLE_S: '15', BENCH_ACCEPT_WARMUP: '1000' },
  },
  {
    file: 'http-stateful',
    figures: ['http-stateful'],
    env: { BENCH_N: '40', BENCH_SAMPLE_S: '20' },
  },
  {
    file: 'http-oneshot-pool',
    figures: ['http-oneshot-pool'],
    env: {
      BENCH_FIGURES: 'http-oneshot-pool',
      BENCH_N: '100',
      BENCH_SAMPLE_S: '25',
      BENCH_POOL_BASELINE: 'exec',
      BENCH_POOL_PACE_MS: '0',
    },
  },
  {
    file: 'http-oneshot-cold',
    figures: ['http-oneshot-cold'],
    env: { BENCH_N: '30', BENCH_SAMPLE_S: '20' },
  },
];

/** Every bench here: the deployment's configuration and the budgets' sample counts. */
const COMMON_ENV = { BENCH_API_KEYS: '1', BENCH_WARMUP: '3' };

interface Outcome {
  check: Check;
  /** One entry per attempt: the measured value (null: not measured) and whether it was within the budget. */
  attempts: { value: number | null; pass: boolean }[];
  baseline: number | null;
}

function evaluate(check: Check, figures: Fig[]): { value: number | null; pass: boolean; baseline: number | null } {
  const f = figures.find((x) => x.bench === check.figure);
  const raw = f && !f.error ? f[check.key] : undefined;
  const value = typeof raw === 'number' && Number.isFinite(raw) ? raw : null;
  const b = check.baseline_key && f ? f[check.baseline_key] : undefined;
  const baseline = typeof b === 'number' ? b : null;
  if (value === null) return { value, pass: false, baseline };
  const pass = (check.max === undefined || value <= check.max) && (check.min === undefined || value >= check.min);
  return { value, pass, baseline };
}

const budgetText = (c: Check) =>
  [c.max !== undefined ? `≤ ${c.max}` : '', c.min !== undefined ? `≥ ${c.min}` : ''].filter(Boolean).join(', ');

function verdict(o: Outcome): string {
  const [first, second] = o.attempts;
  if (!first) return 'not run';
  if (first?.pass) return 'pass';
  if (second?.pass) return 'pass (missed once, passed on the retry)';
  if (second) return 'FAIL (missed twice)';
  return 'FAIL';
}

const failed = (o: Outcome) => o.attempts.length > 0 && !o.attempts.some((a) => a.pass);

function table(outcomes: Outcome[]): string {
  const fmt = (v: number | null) => (v === null ? 'not measured' : String(round(v, 3)));
  const rows = [['check', 'what', 'budget', 'measured', 'baseline', 'result']];
  for (const o of outcomes) {
    rows.push([
      o.check.id,
      o.check.what,
      `${budgetText(o.check)} ${o.check.unit}`.trim(),
      o.attempts.map((a) => fmt(a.value)).join(' → '),
      o.baseline === null ? '' : `${round(o.baseline, 3)} (${o.check.baseline_key})`,
      verdict(o),
    ]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r, j) => {
      const line = r.map((c, i) => c.padEnd(widths[i]!)).join('  ');
      return j === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
    })
    .join('\n');
}

/** The budgets file as read, or an error naming what is wrong in it: a check that names no figure measured here. */
function validBudgets(json: unknown, file: string): Budgets {
  const checks = (json as Partial<Budgets> | null)?.checks;
  if (!Array.isArray(checks)) throw new Error(`${file}: no "checks" array`);
  const figures = new Set(PLAN.flatMap((p) => p.figures));
  const ids = new Set<string>();
  for (const c of checks as Partial<Check>[]) {
    const where = `${file}: check ${JSON.stringify(c?.id)}`;
    if (typeof c?.id !== 'string' || ids.has(c.id)) throw new Error(`${where}: needs an "id" of its own`);
    ids.add(c.id);
    if (typeof c.figure !== 'string' || !figures.has(c.figure))
      throw new Error(`${where}: "figure" must be one of ${[...figures].join(', ')}`);
    if (typeof c.key !== 'string') throw new Error(`${where}: needs the "key" of the figure it checks`);
    const bound = (v: unknown) => v === undefined || (typeof v === 'number' && Number.isFinite(v));
    if ((c.max === undefined && c.min === undefined) || !bound(c.max) || !bound(c.min))
      throw new Error(`${where}: needs a numeric "max" or "min"`);
  }
  return { checks: checks as Check[] };
}

/** The quick start's data disk (btrfs with quotas), where the benches' data directories are made. */
async function quotaDataParent(): Promise<string> {
  const parent = process.env.BENCH_DATA_PARENT || process.env.SANDGATE_DATA_DIR || '/var/lib/sandgate';
  const quota = await SubvolumeQuota.forDataDir(parent, 1 << 20).catch((e: Error) => ({ unavailable: e.message }));
  if ('unavailable' in quota) {
    throw new Error(
      `bench:ci measures on the quick start's data disk, and ${parent} has no disk quotas (${quota.unavailable}): ` +
        'run `npm run setup` as root (it puts /var/lib/sandgate on btrfs with quotas), or point BENCH_DATA_PARENT ' +
        'at a btrfs directory with quotas enabled',
    );
  }
  return parent;
}

async function main() {
  forwardSignals();
  const started = Date.now();
  const budgetsFile = process.env.BENCH_CI_BUDGETS || join(ROOT, 'bench', 'budgets.json');
  const budgets = validBudgets(JSON.parse(await readFile(budgetsFile, 'utf8')), budgetsFile);
  const reportOnly = process.env.BENCH_CI_REPORT_ONLY === '1';
  const only = (process.env.BENCH_CI_ONLY ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const out = process.env.BENCH_OUT;
  const record = async (line: unknown) => {
    process.stdout.write(`${JSON.stringify(line)}\n`);
    if (out) await appendFile(out, `${JSON.stringify(line)}\n`);
  };
  if (out) await writeFile(out, '');

  const parent = await quotaDataParent();
  const dataParent = join(parent, `bench-ci-${randomBytes(4).toString('hex')}`);
  await mkdir(dataParent, { mode: 0o711 });
  await chmod(dataParent, 0o711);
  // Each bench removes its own data directory, also when interrupted; this removes what would be left.
  const removeData = () => rm(dataParent, { recursive: true, force: true });
  const info = await machine();
  process.stderr.write(
    `sandgate bench:ci — ${new Date(started).toISOString()}\n${Object.entries(info)
      .map(([k, v]) => `  ${k}: ${v}`)
      .join('\n')}\n  data directories under ${dataParent} (btrfs, per-session quotas)\n\n`,
  );
  await record({ bench_ci: 'start', machine: info, started_at: new Date(started).toISOString(), budgets: budgetsFile });

  const plan = PLAN.filter((step) => only.length === 0 || only.includes(step.file));
  const outcomes = new Map<string, Outcome[]>(
    plan.map((step) => [
      step.file,
      budgets.checks
        .filter((c) => step.figures.includes(c.figure))
        .map((check): Outcome => ({ check, attempts: [], baseline: null })),
    ]),
  );
  const runs: {
    file: string;
    attempt: number;
    ready_after_s: number;
    seconds: number;
    /** How the bench ended, when it ended instead of measuring. */
    exit?: string;
    contention: Contention;
  }[] = [];
  const envOf = (step: (typeof PLAN)[number]) => ({ ...COMMON_ENV, ...step.env, BENCH_DATA_PARENT: dataParent });
  /** Measures `run` (already started) once it is ready, and checks what it measured. */
  /**
   * Lets `run` measure once it is ready, and checks what it measured; answers whether a check was missed. A bench that
   * ended instead of measuring (it failed to start, or crashed) is ended here and its error figures are checked.
   */
  const measure = async (step: (typeof PLAN)[number], run: BenchRun, attempt: number): Promise<boolean> => {
    const asked = Date.now();
    await run.ready;
    // Since bench:ci started (the first attempts all start then) or since the retry was asked for.
    const readyAfter = round(((run.readyAt ?? Date.now()) - (attempt === 1 ? started : asked)) / 1000, 1);
    const t0 = Date.now();
    const watch = await watchContention();
    process.stderr.write(
      `bench:ci: ${step.file}${attempt === 2 ? ' (retry)' : ''} (ready after ${readyAfter} s) measuring ...\n`,
    );
    let figures = await run.measure();
    const contention = await watch.end();
    const seconds = round((Date.now() - t0) / 1000, 1);
    let exit: string | undefined;
    if (figures === null) ({ figures, exit } = await run.finish());
    runs.push({ file: step.file, attempt, ready_after_s: readyAfter, seconds, exit, contention });
    await record({
      bench_ci: 'run',
      file: step.file,
      attempt,
      ready_after_s: readyAfter,
      seconds,
      exit,
      ...contention,
    });
    for (const f of figures) if (out) await appendFile(out, `${JSON.stringify({ ...f, attempt, contention })}\n`);
    let missed = false;
    for (const o of outcomes.get(step.file)!) {
      const { value, pass, baseline } = evaluate(o.check, figures);
      o.attempts.push({ value, pass });
      o.baseline ??= baseline;
      missed ||= !pass;
      await record({
        check: o.check.id,
        figure: o.check.figure,
        key: o.check.key,
        ...(o.check.max !== undefined ? { max: o.check.max } : {}),
        ...(o.check.min !== undefined ? { min: o.check.min } : {}),
        measured: value,
        baseline,
        attempt,
        pass,
      });
    }
    process.stderr.write(
      `bench:ci: ${step.file} measured in ${seconds} s (load ${contention.load1_start}→${contention.load1_end}, ` +
        `CPU pressure ${contention.cpu_pressure_pct ?? '?'}%)${missed ? ': a budget missed' : ''}\n`,
    );
    return missed;
  };
  const benches = plan.map((step) => ({ step, run: startBench(step.file, envOf(step), step.figures) }));
  try {
    // Start-ups (a sandgate process loads for 3-25 s, depending on the machine's load) overlap; measuring does not:
    // each bench measures alone, the others waiting idle, and has ended (its processes and containers gone) before
    // the next one measures. A bench that missed a budget stays up, idle, to measure again at the end.
    const again: typeof benches = [];
    for (const b of benches) {
      if (isInterrupted()) break;
      if ((await measure(b.step, b.run, 1)) && !reportOnly) again.push(b);
      else await b.run.finish();
    }
    // The retry: on the same warm stack, minutes later (a neighbour's burst has usually passed); or, for a bench that
    // ended instead of measuring, from a fresh start. A missed check must miss again to fail.
    for (const b of again) {
      if (isInterrupted()) break;
      process.stderr.write(`bench:ci: ${b.step.file} missed a budget; measuring it once more\n`);
      const run = b.run.ended ? startBench(b.step.file, envOf(b.step), b.step.figures) : b.run;
      await measure(b.step, run, 2);
      await run.finish();
    }
  } finally {
    await Promise.all(benches.map((b) => b.run.finish()));
    await removeData();
  }

  const seconds = Math.round((Date.now() - started) / 1000);
  const all = [...outcomes.values()].flat();
  const failures = all.filter(failed);
  await record({
    bench_ci: 'end',
    seconds,
    checks: all.length,
    failed: failures.map((o) => o.check.id),
    passed_on_retry: all.filter((o) => !failed(o) && !o.attempts[0]?.pass).map((o) => o.check.id),
    runs,
  });
  process.stderr.write(`\n${table(all)}\n\n`);
  const loads = runs.map((r) => `${r.file} ${r.contention.load1_start}`).join(', ');
  process.stderr.write(`load average at each bench's start: ${loads}\n`);
  if (isInterrupted()) {
    process.stderr.write(`bench:ci: interrupted after ${seconds} s\n`);
  } else if (failures.length === 0) {
    process.stderr.write(`bench:ci: all ${all.length} checks within budget — ${seconds} s\n`);
  } else {
    process.stderr.write(
      `bench:ci: ${failures.length} of ${all.length} checks over budget — ${seconds} s\n` +
        failures
          .map((o) =>
            o.attempts.length > 1
              ? `  ${o.check.id}: missed on the first run and on the retry: a regression, not noise\n`
              : `  ${o.check.id}: ${o.attempts[0]?.value === null ? 'not measured (see the error above)' : 'missed'}\n`,
          )
          .join('') +
        `Budgets: ${budgetsFile} (how they were set: docs/performance.md, "bench:ci").\n`,
    );
  }
  if (isInterrupted()) process.exitCode = 130;
  else if (failures.length > 0 && !reportOnly) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.stack : err);
  process.exit(1);
});
