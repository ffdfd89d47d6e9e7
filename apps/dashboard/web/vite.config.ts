import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The dashboard is built into ../build and served by the gateway at /dashboard/ under a CSP that allows
 * only 'self': nothing is inlined (no data: assets) and nothing comes from another origin.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/dashboard/',
  publicDir: false,
  clearScreen: false,
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../build', import.meta.url)),
    emptyOutDir: true,
    assetsInlineLimit: 0,
    target: 'es2022',
    // pdf.js alone is ~1 MB; it is loaded only when a PDF is previewed.
    chunkSizeWarningLimit: 2048,
    modulePreload: { polyfill: false },
  },
  worker: { format: 'es' },
});
