// Compiles the test files scripts/run-tests.sh is about to run, once, before the runner starts: one esbuild build of
// every file given (code splitting, so what they share is compiled once), the workspace packages (@sandgate/*) and
// test helpers bundled, node_modules left to Node. Under `node --import tsx` every test process would compile the
// same TypeScript again and resolve each import through tsx's loader thread: about 1 s and 2 s of CPU per process,
// and CI starts some 150 of them. Source maps keep stack traces on the .ts lines.
//
//   node scripts/build-tests.mjs OUT_DIR FILE...     (FILE: a path from the repository root, e.g. test/sse.test.ts)
//
// Each FILE becomes OUT_DIR/FILE.mjs (test/sse.test.ts → OUT_DIR/test/sse.test.ts.mjs), so the reporters can name
// the source file (scripts/file-times.mjs strips OUT_DIR and `.mjs`). import.meta.url, .dirname and .filename keep
// meaning the source file they are written in (tests find fixtures, the repository root and packages through them).
// Child processes a test starts (`node --import tsx apps/…/main.ts`) still run the sources through tsx.
import { readFile } from 'node:fs/promises';
import { dirname, extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const [outDir, ...files] = process.argv.slice(2);
if (!outDir || files.length === 0) {
  console.error('usage: node scripts/build-tests.mjs OUT_DIR FILE...');
  process.exit(2);
}

const LOADERS = { '.ts': 'ts', '.mts': 'ts', '.tsx': 'tsx' };

/** Bundles the project's own code (relative imports and @sandgate/*); every other package stays an import. */
const ownCodeOnly = {
  name: 'own-code-only',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) =>
      args.path.startsWith('@sandgate/') ? undefined : { path: args.path, external: true },
    );
  },
};

/** import.meta in each bundled source file still names that file, not the bundle it ends up in. */
const sourceImportMeta = {
  name: 'source-import-meta',
  setup(b) {
    b.onLoad({ filter: /\.(?:m?ts|tsx)$/ }, async (args) => {
      if (args.path.includes('/node_modules/')) return undefined;
      const source = await readFile(args.path, 'utf8');
      const contents = source
        .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href))
        .replaceAll('import.meta.dirname', JSON.stringify(dirname(args.path)))
        .replaceAll('import.meta.filename', JSON.stringify(args.path));
      return { contents, loader: LOADERS[extname(args.path)] };
    });
  },
};

await build({
  entryPoints: files.map((file) => ({ in: file, out: file })),
  outdir: resolve(outDir),
  outExtension: { '.js': '.mjs' },
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: `node${process.versions.node.split('.')[0]}`,
  sourcemap: 'linked',
  sourcesContent: false,
  // Fastify, BullMQ and the tests print names of functions and classes; keep them as written.
  keepNames: true,
  plugins: [ownCodeOnly, sourceImportMeta],
  logLevel: 'warning',
});
