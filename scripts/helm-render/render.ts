/**
 * Renders helm/sandgate (or another chart) with helm-render (main.go, built on first use by build.sh) and parses
 * the manifests: what the chart tests and `npm run helm:template` use where the helm binary cannot be installed.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
export const CHART_DIR = join(here, '..', '..', 'helm', 'sandgate');

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [field: string]: unknown;
}

export interface RenderOptions {
  chart?: string;
  /** Values over the chart's values.yaml, as one `-f` file would give them. */
  values?: Record<string, unknown>;
  name?: string;
  namespace?: string;
}

/** The renderer's error output, as `helm template` prints it (a failed `required` or `fail`). */
export class RenderError extends Error {}

let built: Promise<string> | undefined;

/** The helm-render binary, built once per process (and only when main.go changed since the last build). */
export function renderer(): Promise<string> {
  built ??= run('bash', [join(here, 'build.sh')]).then(({ stdout }) => stdout.trim());
  return built;
}

/** The chart's manifests as text, exactly as the renderer printed them. */
export async function renderText({
  chart = CHART_DIR,
  values = {},
  name = 'sg',
  namespace = 'sandgate',
}: RenderOptions = {}): Promise<string> {
  const bin = await renderer();
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-helm-'));
  try {
    const file = join(dir, 'values.yaml');
    // JSON is YAML: the values go in as one file, as `helm template -f` takes them.
    await writeFile(file, JSON.stringify(values));
    const { stdout } = await run(bin, ['-f', file, '--name', name, '--namespace', namespace, chart], {
      maxBuffer: 16 << 20,
    });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new RenderError((e.stderr ?? e.message).trim());
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The chart's manifests as objects; a duplicate key or any YAML error fails, as kubectl's decoder would. */
export async function renderChart(options: RenderOptions = {}): Promise<Manifest[]> {
  const docs = parseAllDocuments(await renderText(options), { uniqueKeys: true, prettyErrors: true });
  if (!Array.isArray(docs)) throw new RenderError('the renderer printed no YAML documents');
  return docs
    .map((d) => {
      if (d.errors.length) throw new RenderError(d.errors.map((e) => e.message).join('\n'));
      return d.toJS() as Manifest;
    })
    .filter((m) => m !== null);
}

// `npm run helm:template -- [values.json]`: print the rendered chart.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const values = process.argv[2]
    ? JSON.parse(await import('node:fs').then((fs) => fs.readFileSync(process.argv[2]!, 'utf8')))
    : {};
  await renderText({ values }).then(
    (text) => process.stdout.write(text),
    (err: Error) => {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 1;
    },
  );
}
