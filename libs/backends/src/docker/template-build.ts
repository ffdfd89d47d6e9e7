import { createReadStream } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type Dockerode from 'dockerode';
import { pack as tarPack, type Pack } from 'tar-stream';
import type { TemplateImageSpec } from '@sandgate/contracts';
import { CONTEXT, templateDockerfile } from '../templates/template-dockerfile.ts';
import { TEMPLATE_IMAGE_LABELS, templateImageRef, type TemplateBuildSettings } from '../templates/template-image.ts';
import { isNotFound } from './engine-errors.ts';

/** One template build, as a worker hands it to a backend. */
export interface TemplateBuildRequest {
  /** The recipe's hash (recipeHash): the image is tagged and labelled with it. */
  hash: string;
  spec: TemplateImageSpec;
}

/** What a build made: the image its sandboxes run, and whether it was there already (nothing built). */
export interface TemplateBuildOutcome {
  image: string;
  cached: boolean;
}

/** The build failed: the engine's last word, for the template's error (its log holds the rest). */
export class TemplateBuildError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TemplateBuildError';
  }
}

export interface TemplateBuildScope {
  docker: Dockerode;
  deployment: string;
  settings: TemplateBuildSettings;
  /** Bytes the wheels directory may hold: it goes whole into each build that installs Python packages. */
  wheelsMaxBytes: number;
}

/**
 * Builds a template's image on the engine from its recipe, as images/runtime/build.sh builds the runtime image: no
 * registry, its RUN steps on the default bridge. An image already tagged for this hash and built on the same base
 * image is kept as it is. The engine's output goes to `log` as it comes; aborting `signal` stops the build.
 */
export async function buildTemplateImage(
  scope: TemplateBuildScope,
  req: TemplateBuildRequest,
  log: (text: string) => void,
  signal: AbortSignal,
): Promise<TemplateBuildOutcome> {
  const { docker } = scope;
  const image = templateImageRef(scope.deployment, req.hash);
  const base = await docker
    .getImage(req.spec.base)
    .inspect()
    .catch((err: unknown) => {
      if (isNotFound(err)) throw new TemplateBuildError(`the base image ${req.spec.base} is not on the engine`);
      throw err;
    });
  const found = await docker
    .getImage(image)
    .inspect()
    .catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
  const labels = found?.Config.Labels ?? {};
  if (labels[TEMPLATE_IMAGE_LABELS.hash] === req.hash && labels[TEMPLATE_IMAGE_LABELS.base] === base.Id) {
    log(`${image} is built already (recipe ${req.hash.slice(0, 12)} on ${req.spec.base})\n`);
    return { image, cached: true };
  }
  const context = templateDockerfile(req.spec, scope.settings, req.hash);
  log(`building ${image} on ${req.spec.base}\n`);
  const tar = tarPack();
  const packing = packContext(tar, context, scope).catch((err: unknown) => {
    tar.destroy(err as Error);
    throw err;
  });
  const stream = await docker.buildImage(
    tar as unknown as NodeJS.ReadableStream,
    {
      t: image,
      labels: {
        [TEMPLATE_IMAGE_LABELS.hash]: req.hash,
        [TEMPLATE_IMAGE_LABELS.base]: base.Id,
        [TEMPLATE_IMAGE_LABELS.deployment]: scope.deployment,
      },
      rm: true,
      forcerm: true,
      abortSignal: signal,
    } as Dockerode.ImageBuildOptions,
  );
  const [, failure] = await Promise.all([packing, followBuild(stream, log, signal)]);
  if (failure !== undefined) throw new TemplateBuildError(shortFailure(failure));
  return { image, cached: false };
}

/** The engine's failure, without the whole command it quotes (the log has it): which step failed, and how. */
function shortFailure(failure: string): string {
  const m = /^The command '(?:\/bin\/\S+ (?:\S+ )*?-c )?([\s\S]*)' returned a non-zero code: (\d+)$/.exec(failure);
  if (!m) return failure;
  const step = m[1]!.replace(/\s+/g, ' ').trim();
  const shown = step.length > 80 ? `${step.slice(0, 77)}...` : step;
  return `a step of the recipe exited with code ${m[2]} (${shown}); its build log says why`;
}

/** Reads the engine's build output to its end: each line to `log`; answers the error it ended with, if any. */
async function followBuild(
  stream: NodeJS.ReadableStream,
  log: (text: string) => void,
  signal: AbortSignal,
): Promise<string | undefined> {
  let rest = '';
  let failure: string | undefined;
  const take = (line: string) => {
    if (line.trim() === '') return;
    let msg: { stream?: string; error?: string; status?: string };
    try {
      msg = JSON.parse(line) as typeof msg;
    } catch {
      return log(`${line}\n`);
    }
    if (msg.stream !== undefined) log(msg.stream);
    else if (msg.status !== undefined) log(`${msg.status}\n`);
    if (msg.error !== undefined) {
      failure = msg.error.trim();
      log(`${failure}\n`);
    }
  };
  try {
    for await (const chunk of stream as AsyncIterable<Buffer | string>) {
      rest += chunk.toString();
      const lines = rest.split('\n');
      rest = lines.pop()!;
      lines.forEach(take);
    }
    take(rest);
  } catch (err) {
    if (signal.aborted) throw new TemplateBuildError(`the build was stopped: ${String(signal.reason)}`, { cause: err });
    throw err;
  }
  if (signal.aborted) throw new TemplateBuildError(`the build was stopped: ${String(signal.reason)}`);
  return failure;
}

/** Writes the build context: the Dockerfile, what it was made with, the wheels directory and the CA bundle. */
async function packContext(
  tar: Pack,
  context: ReturnType<typeof templateDockerfile>,
  scope: TemplateBuildScope,
): Promise<void> {
  const add = (name: string, bytes: Buffer, mode = 0o644) =>
    new Promise<void>((resolve, reject) =>
      tar.entry({ name, mode, mtime: new Date(0) }, bytes, (err) => (err ? reject(err) : resolve())),
    );
  await add('Dockerfile', Buffer.from(context.dockerfile));
  for (const f of context.files) await add(f.path, f.bytes, f.mode);
  if (context.needsCa) {
    const path = scope.settings.caFile!;
    const info = await stat(path);
    await addFile(tar, CONTEXT.ca, path, info.size);
  }
  if (context.needsWheels) {
    const dir = scope.settings.wheelsDir!;
    let total = 0;
    for (const path of await filesUnder(dir)) {
      const info = await stat(path);
      total += info.size;
      if (total > scope.wheelsMaxBytes) {
        throw new TemplateBuildError(
          `the wheels directory ${dir} holds more than ${scope.wheelsMaxBytes} bytes (SANDGATE_TEMPLATE_WHEELS_MAX_BYTES)`,
        );
      }
      await addFile(tar, `${CONTEXT.wheels}/${relative(dir, path)}`, path, info.size);
    }
    // An empty directory still makes COPY wheels/ work.
    if (total === 0) await add(`${CONTEXT.wheels}/.keep`, Buffer.alloc(0));
  }
  tar.finalize();
}

function addFile(tar: Pack, name: string, path: string, size: number): Promise<void> {
  const entry = tar.entry({ name, size, mode: 0o644, mtime: new Date(0) });
  return pipeline(createReadStream(path), entry);
}

/** Regular files under a directory (symbolic links followed), in a stable order. */
async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (at: string) => {
    for (const name of (await readdir(at)).sort()) {
      const path = join(at, name);
      const info = await stat(path);
      if (info.isDirectory()) await walk(path);
      else if (info.isFile()) out.push(path);
    }
  };
  await walk(dir);
  return out;
}

/**
 * Removes this deployment's template images whose recipe no template has any more (`keep`: the hashes still used).
 * An image a container still runs stays (the engine refuses to remove it); the next prune tries again.
 */
export async function pruneTemplateImages(
  docker: Dockerode,
  deployment: string,
  keep: ReadonlySet<string>,
): Promise<string[]> {
  const images = await docker.listImages({
    filters: { label: [`${TEMPLATE_IMAGE_LABELS.deployment}=${deployment}`, TEMPLATE_IMAGE_LABELS.hash] },
  });
  const removed: string[] = [];
  for (const info of images) {
    const hash = info.Labels?.[TEMPLATE_IMAGE_LABELS.hash];
    if (hash === undefined || keep.has(hash)) continue;
    for (const tag of info.RepoTags ?? []) {
      const ok = await docker
        .getImage(tag)
        .remove()
        .then(
          () => true,
          () => false,
        );
      if (ok) removed.push(tag);
    }
  }
  return removed;
}
