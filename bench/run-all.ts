/**
 * `npm run bench`: every bench in sequence, each in its own process (so one's memory or sockets never
 * colour the next), their JSON lines passed through on stdout, then a summary table on stderr.
 * raw-docker-cold runs first; its p50 and throughput are handed to the later benches (BENCH_RAW_COLD_*), which
 * report them beside the raw runs they interleave with their own samples (their ratios use the latter).
 * BENCH_ONLY=name,name runs a subset; BENCH_OUT=file also writes the JSON lines there.
 */
import { appendFile, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { machine } from './lib/machine.ts';
import { docker } from './lib/raw-docker.ts';
import { forwardSignals, isInterrupted, runBench, type Fig } from './lib/run-bench.ts';
import { textTable } from './lib/text-table.ts';

const BENCHES: { file: string; figures: string[] }[] = [
  { file: 'raw-docker-cold', figures: ['raw-docker-cold', 'raw-docker-cold-throughput'] },
  { file: 'raw-docker-exec', figures: ['raw-docker-exec'] },
  { file: 'http-oneshot-cold', figures: ['http-oneshot-cold'] },
  { file: 'http-oneshot-pool', figures: ['http-oneshot-pool', 'http-oneshot-pool-throughput'] },
  { file: 'http-stateful', figures: ['http-stateful'] },
  { file: 'http-session', figures: ['http-session'] },
  { file: 'mcp-session', figures: ['mcp-session'] },
  { file: 'gateway-overhead', figures: ['gateway-overhead', 'gateway-overhead-throughput'] },
  { file: 'sse-fanout', figures: ['sse-fanout'] },
  { file: 'sse-idle', figures: ['sse-idle'] },
  { file: 'memory-stdout-flood', figures: ['memory-stdout-flood'] },
  { file: 'memory-upload', figures: ['memory-upload'] },
  { file: 'http-oneshot-k8s', figures: ['http-oneshot-k8s'] },
  // Sessions that last, on the quick start's configuration (btrfs data disk with quotas: bench/lib/quick-start.ts).
  { file: 'session-resume', figures: ['session-resume'] },
  { file: 'session-resume-state', figures: ['session-resume-state'] },
  { file: 'session-fork', figures: ['session-fork', 'session-snapshot'] },
  { file: 'session-undo', figures: ['session-undo', 'session-undo-dataframe'] },
  { file: 'template-pool', figures: ['template-pool'] },
];
forwardSignals();

function keyFigure(f: Fig): string {
  if (f.error) return `error: ${String(f.error).slice(0, 70)}`;
  if (f.executions_per_s !== undefined) return `${f.executions_per_s}/s`;
  if (f.accepted_per_s !== undefined) return `${f.accepted_per_s}/s accepted`;
  if (f.subscribers !== undefined) return `${f.subscribers_complete}/${f.subscribers} complete`;
  if (f.sandgate_cpu_ms_per_execution_normalized !== undefined)
    return `${f.sandgate_cpu_ms_per_execution_normalized} ms CPU`;
  const growth = Object.keys(f).filter((k) => k.endsWith('_rss_growth_mb'));
  if (growth.length) return growth.map((k) => `${k.replace('_rss_growth_mb', '')} +${f[k]} MB`).join(', ');
  return '';
}

/**
 * What the key figure would be if sandgate's own work were zero, measured in the same run (a figure's `limit`), and
 * the figure's ratio to it.
 */
function limitText(f: Fig): string {
  const limit = f.limit as { value: number; unit: string } | undefined;
  if (!limit) return '';
  const unit = limit.unit.startsWith('/') ? limit.unit : ` ${limit.unit}`;
  return `${limit.value}${unit}${f.limit_ratio === undefined ? '' : ` (${String(f.limit_ratio)}×)`}`;
}

function table(figures: Fig[]): string {
  const rows = [['bench', 'n', 'p50 ms', 'p95 ms', 'p99 ms', 'figure', 'limit (ratio)', 'ratio', 'target', 'pass']];
  for (const f of figures) {
    rows.push([
      f.bench,
      String(f.n ?? ''),
      String(f.p50_ms ?? '-'),
      String(f.p95_ms ?? '-'),
      String(f.p99_ms ?? '-'),
      keyFigure(f),
      limitText(f),
      f.ratio === undefined ? '' : String(f.ratio),
      f.target ?? '',
      f.pass ? 'PASS' : 'MISS',
    ]);
  }
  return textTable(rows);
}

async function main() {
  const only = (process.env.BENCH_ONLY ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const out = process.env.BENCH_OUT;
  if (out) await writeFile(out, '');
  const started = Date.now();
  const info = await machine();
  process.stderr.write(
    `sandgate bench — ${new Date(started).toISOString()}\n${Object.entries(info)
      .map(([k, v]) => `  ${k}: ${v}`)
      .join('\n')}\n\n`,
  );
  if (out) await appendFile(out, `${JSON.stringify({ machine: info, started_at: new Date(started).toISOString() })}\n`);
  const env: Record<string, string> = {};
  const all: Fig[] = [];
  for (const b of BENCHES) {
    if (isInterrupted()) break;
    if (only.length && !only.some((o) => b.file === o || b.figures.includes(o))) continue;
    const t0 = Date.now();
    // Noise indicators: this machine is shared, and other people's containers compete for the same 2 cores.
    const running = await docker.listContainers().then(
      (l) => l.length,
      () => -1,
    );
    const context = { load1_before: Number(loadavg()[0]!.toFixed(2)), engine_containers_running_before: running };
    process.stderr.write(
      `run-all: ${b.file} ... (load ${context.load1_before}, ${running} containers running on the engine)\n`,
    );
    const { figures, exit } = await runBench(b.file, env, b.figures);
    process.stderr.write(`run-all: ${b.file} done in ${((Date.now() - t0) / 1000).toFixed(1)} s (${exit})\n`);
    const raw = figures.find((f) => f.bench === 'raw-docker-cold' && !f.error);
    if (raw) env.BENCH_RAW_COLD_P50_MS = String(raw.p50_ms);
    const rawT = figures.find((f) => f.bench === 'raw-docker-cold-throughput' && !f.error);
    if (rawT) env.BENCH_RAW_COLD_PER_S = String(rawT.executions_per_s);
    all.push(...figures);
    if (out) for (const f of figures) await appendFile(out, `${JSON.stringify({ ...f, context })}\n`);
  }
  const loadEnd = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  if (isInterrupted()) process.exitCode = 130;
  process.stderr.write(
    `\n${table(all)}\n\n${all.filter((f) => f.pass).length}/${all.length} pass — ${((Date.now() - started) / 1000).toFixed(0)} s; load average at the end: ${loadEnd}\n`,
  );
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.stack : err);
  process.exit(1);
});
