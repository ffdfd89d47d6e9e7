import { fileURLToPath } from 'node:url';

/**
 * Where the built dashboard lives (static files the gateway serves at /dashboard/). It is built from
 * web/ by `npm run setup` (src/build.ts) and never committed: the sources are the truth.
 */
export const DASHBOARD_DIR = fileURLToPath(new URL('../build/', import.meta.url));

/** The browser sources the build is made from. */
export const DASHBOARD_SOURCES = fileURLToPath(new URL('../web/', import.meta.url));

/** The build writes this file last, holding the hash of the sources it was built from. */
export const SOURCE_HASH_FILE = '.source-hash';
