import { readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { parse as parseYaml } from 'yaml';
import { TemplateRecipeSchema, type TemplateRecipe } from '@sandgate/contracts';

/**
 * SANDGATE_TENANT_TEMPLATES: `{ "<tenant>" | "*": ["<template>", …] }`. A tenant with an entry (its own, else `*`'s)
 * may use those templates only; a tenant with none may use every template. The runtime image is everyone's.
 */
export const TenantTemplatesSchema = Type.Record(
  Type.String({ pattern: '^([A-Za-z0-9_-]{1,64}|\\*)$' }),
  Type.Array(Type.String({ minLength: 1, maxLength: 63 }), { maxItems: 1000 }),
);
export type TenantTemplates = Static<typeof TenantTemplatesSchema>;

/** Whether `tenant` may use the template `name` under SANDGATE_TENANT_TEMPLATES. */
export function templateAllowed(registry: TenantTemplates, tenant: string, name: string): boolean {
  const list = Object.hasOwn(registry, tenant) ? registry[tenant] : registry['*'];
  return list === undefined || list.includes(name);
}

/** What bounds a recipe beyond its schema: the deployment's maximum limits and the size of what it adds. */
export interface RecipeBounds {
  backend: 'docker' | 'kubernetes';
  memoryMb: number;
  cpus: number;
  execTimeoutMs: number;
  /** Bytes of all of a recipe's files together (SANDGATE_TEMPLATE_MAX_FILE_BYTES). */
  templateMaxFileBytes: number;
}

/** Where a recipe's files may not go: what the sandbox mounts over the image, or the kernel provides. */
const RESERVED = ['/mnt', '/tmp', '/proc', '/sys', '/dev', '/run'];
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The bytes of a recipe file, or why they cannot be read. */
export function fileBytes(f: { content?: string | undefined; content_base64?: string | undefined }): Buffer | string {
  if ((f.content === undefined) === (f.content_base64 === undefined)) return 'give content or content_base64';
  if (f.content !== undefined) return Buffer.from(f.content, 'utf8');
  const b64 = f.content_base64!.replace(/\s+/g, '');
  if (!BASE64.test(b64) || b64.length % 4 !== 0) return 'content_base64 is not valid base64';
  return Buffer.from(b64, 'base64');
}

/**
 * What is wrong with a recipe that its schema lets through, as `field: problem` lines: file paths and sizes, limits
 * beyond the deployment's, an image the Kubernetes backend needs. Empty when it is good.
 */
export function recipeProblems(r: TemplateRecipe, b: RecipeBounds): string[] {
  const problems: string[] = [];
  let total = 0;
  const paths = new Set<string>();
  (r.files ?? []).forEach((f, i) => {
    const at = `files[${i}]`;
    const normal = posix.normalize(f.path);
    if (normal !== f.path || f.path.endsWith('/') || f.path.split('/').includes('..')) {
      problems.push(`${at}.path: "${f.path}" is not a plain absolute path (no "..", "//" or trailing "/")`);
    } else if (RESERVED.some((d) => f.path === d || f.path.startsWith(`${d}/`))) {
      problems.push(`${at}.path: nothing goes under ${RESERVED.join(', ')} (the sandbox mounts its own there)`);
    } else if (paths.has(f.path)) {
      problems.push(`${at}.path: "${f.path}" is given twice`);
    }
    paths.add(f.path);
    const bytes = fileBytes(f);
    if (typeof bytes === 'string') problems.push(`${at}: ${bytes}`);
    else total += bytes.length;
  });
  if (total > b.templateMaxFileBytes) {
    problems.push(`files: ${total} bytes in all; at most ${b.templateMaxFileBytes} (SANDGATE_TEMPLATE_MAX_FILE_BYTES)`);
  }
  const l = r.limits ?? {};
  if (l.memory_mb !== undefined && l.memory_mb > b.memoryMb)
    problems.push(`limits.memory_mb: ${l.memory_mb} is above this deployment's maximum of ${b.memoryMb}`);
  if (l.cpus !== undefined && l.cpus > b.cpus)
    problems.push(`limits.cpus: ${l.cpus} is above this deployment's maximum of ${b.cpus}`);
  if (l.timeout_ms !== undefined && l.timeout_ms > b.execTimeoutMs)
    problems.push(`limits.timeout_ms: ${l.timeout_ms} is above this deployment's maximum of ${b.execTimeoutMs}`);
  if (b.backend === 'kubernetes' && r.image === undefined) {
    problems.push(
      'image: the kubernetes backend builds no images; name an image built from this recipe in your registry ' +
        '(docs/kubernetes.md "Templates")',
    );
  }
  return problems;
}

/** The schema's complaints about one recipe, as `field: problem` lines. */
export function recipeSchemaProblems(value: unknown): string[] {
  return [...Value.Errors(TemplateRecipeSchema, value)].map(
    (e) => `${e.path.slice(1).replace(/\//g, '.') || '(recipe)'}: ${e.message}`,
  );
}

/**
 * SANDGATE_TEMPLATES: the templates file (JSON or YAML: a list of recipes, or `templates:` holding one), read and
 * checked whole. Answers the recipes, or every problem found, each prefixed by where it is.
 */
export function readTemplatesFile(
  path: string,
  bounds: RecipeBounds,
): { recipes: TemplateRecipe[] } | { problems: string[] } {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(path, 'utf8'));
  } catch (err) {
    return { problems: [`cannot read ${path}: ${(err as Error).message.split('\n')[0]}`] };
  }
  const list = Array.isArray(doc) ? doc : (doc as { templates?: unknown } | null)?.templates;
  if (!Array.isArray(list))
    return { problems: [`${path} holds no list of templates (a list, or "templates:" with one)`] };
  const problems: string[] = [];
  const names = new Set<string>();
  list.forEach((item: unknown, i) => {
    const name = (item as { name?: unknown } | null)?.name;
    const at = `${path} templates[${i}]${typeof name === 'string' ? ` (${name})` : ''}`;
    const schema = recipeSchemaProblems(item);
    if (schema.length > 0) return problems.push(...schema.map((p) => `${at} ${p}`));
    const recipe = item as TemplateRecipe;
    if (names.has(recipe.name)) problems.push(`${at} name: "${recipe.name}" is declared twice`);
    names.add(recipe.name);
    problems.push(...recipeProblems(recipe, bounds).map((p) => `${at} ${p}`));
  });
  return problems.length > 0 ? { problems } : { recipes: list as TemplateRecipe[] };
}
