import { test } from 'node:test';
import assert from 'node:assert/strict';
import { builtinModules } from 'node:module';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = new URL('..', import.meta.url).pathname;
const IMPORT =
  /^\s*(?:import|export)[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^import\s+['"]([^'"]+)['"]/gm;
const TEST_ONLY = /\.test\.tsx?$|\/testing\.ts$|\/testing\/|\/scripts\//;

function* sources(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'generated' || name === 'dist') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sources(path);
    else if (/\.tsx?$/.test(name)) yield path;
  }
}

/** The package a bare specifier names (`@scope/name/sub` → `@scope/name`), or undefined for relative and built-ins. */
function packageOf(spec: string): string | undefined {
  if (spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('node:')) return undefined;
  const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
  return builtinModules.includes(name) ? undefined : name;
}

test('every workspace declares, with a pinned version, each package it imports, and only those', () => {
  const problems: string[] = [];
  for (const group of ['apps', 'libs']) {
    for (const ws of readdirSync(join(ROOT, group))) {
      const dir = join(ROOT, group, ws);
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        name: string;
        dependencies?: Record<string, string>;
        devDependencies?: Record<string, string>;
      };
      const deps = pkg.dependencies ?? {};
      const dev = pkg.devDependencies ?? {};
      const used = new Map<string, boolean>(); // package → imported by shipped code
      for (const file of sources(dir)) {
        for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
          const name = packageOf(m[1] ?? m[2] ?? m[3]!);
          if (name === undefined || name === pkg.name) continue;
          used.set(name, (used.get(name) ?? false) || !TEST_ONLY.test(file));
        }
      }
      for (const [name, shipped] of used) {
        if (shipped ? !(name in deps) : !(name in deps || name in dev)) {
          problems.push(`${group}/${ws} imports ${name} but does not declare it${shipped ? '' : ' (devDependencies)'}`);
        }
      }
      for (const [name, version] of Object.entries({ ...deps, ...dev })) {
        if (!used.has(name) && !name.startsWith('@types/'))
          problems.push(`${group}/${ws} declares ${name} but never imports it`);
        if (!/^\d+\.\d+\.\d+/.test(version))
          problems.push(`${group}/${ws}: ${name}@${version} is not a pinned version`);
      }
    }
  }
  assert.deepEqual(problems, []);
});

test("every workspace's exports name files that exist", () => {
  const missing: string[] = [];
  for (const group of ['apps', 'libs']) {
    for (const ws of readdirSync(join(ROOT, group))) {
      const pkg = JSON.parse(readFileSync(join(ROOT, group, ws, 'package.json'), 'utf8')) as { exports?: unknown };
      const targets = (e: unknown): string[] =>
        typeof e === 'string' ? [e] : typeof e === 'object' && e !== null ? Object.values(e).flatMap(targets) : [];
      for (const target of targets(pkg.exports)) {
        if (!existsSync(join(ROOT, group, ws, target))) missing.push(`${group}/${ws}: ${target}`);
      }
    }
  }
  assert.deepEqual(missing, []);
});
