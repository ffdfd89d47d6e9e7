import { createHash } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip } from 'node:zlib';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DASHBOARD_DIR, DASHBOARD_SOURCES, SOURCE_HASH_FILE } from './index.ts';

const PACKAGE_JSON = fileURLToPath(new URL('../package.json', import.meta.url));
const THIS_FILE = fileURLToPath(import.meta.url);

async function* filesUnder(dir: string): AsyncGenerator<string> {
  for (const e of (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
    const path = join(dir, e.name);
    if (e.isDirectory()) yield* filesUnder(path);
    else if (e.isFile()) yield path;
  }
}

/**
 * A hash of everything the build depends on: the sources, the dashboard's package.json (it pins the
 * exact version of every library bundled) and this file. Content, not mtimes, so a fresh clone or a
 * checkout that touches files without changing them does not rebuild.
 */
export async function sourceHash(): Promise<string> {
  const h = createHash('sha256');
  for (const file of [PACKAGE_JSON, THIS_FILE])
    h.update(`${relative(DASHBOARD_SOURCES, file)}\0`)
      .update(await readFile(file))
      .update('\0');
  for await (const file of filesUnder(DASHBOARD_SOURCES)) {
    h.update(`${relative(DASHBOARD_SOURCES, file)}\0`)
      .update(await readFile(file))
      .update('\0');
  }
  return h.digest('hex');
}

/** Why the build must be (re)made, or null when it matches the sources. */
export async function buildOutdated(): Promise<string | null> {
  const built = await readFile(join(DASHBOARD_DIR, SOURCE_HASH_FILE), 'utf8').catch(() => null);
  if (built === null) return 'not built yet';
  return built.trim() === (await sourceHash()) ? null : 'the sources changed since the last build';
}

const brotli = promisify(brotliCompress);
const gzipped = promisify(gzip);
const COMPRESSIBLE = /\.(js|mjs|css|html|svg)$/;

/**
 * Writes a .br and a .gz beside every text file of the build, which the gateway serves to clients that
 * accept them (the scripts shrink to about a third), so it compresses nothing per request.
 */
async function precompress(dir: string): Promise<void> {
  for await (const file of filesUnder(dir)) {
    if (!COMPRESSIBLE.test(file)) continue;
    const bytes = await readFile(file);
    const br = await brotli(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } });
    await writeFile(`${file}.br`, br);
    await writeFile(`${file}.gz`, await gzipped(bytes, { level: 9 }));
  }
}

/** Builds the dashboard with Vite when the output is missing or stale; returns what it did. */
export async function ensureDashboardBuilt({ force = false }: { force?: boolean } = {}): Promise<string> {
  const reason = force ? 'forced' : await buildOutdated();
  if (reason === null) return 'dashboard build up to date';
  const hash = await sourceHash();
  // Vite is a build-time dependency only: the gateway serves the output without loading it.
  const { build } = await import('vite');
  await build({ configFile: join(DASHBOARD_SOURCES, 'vite.config.ts'), logLevel: 'warn' });
  await precompress(DASHBOARD_DIR);
  await writeFile(join(DASHBOARD_DIR, SOURCE_HASH_FILE), `${hash}\n`);
  return `dashboard built (${reason})`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  ensureDashboardBuilt({ force: process.argv.includes('--force') }).then(
    (what) => console.log(`==> ${what}`),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
