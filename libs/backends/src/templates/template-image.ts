import { createHash } from 'node:crypto';
import type { TemplateImageSpec, TemplateRecipe } from '@sandgate/contracts';

/**
 * Where template builds get their packages from, and what they trust: the deployment's settings
 * (SANDGATE_TEMPLATE_*). They go into a recipe's hash, so that changing them builds the images again.
 */
export interface TemplateBuildSettings {
  /** pip's index; null: none, the wheels directory only. */
  pipIndexUrl: string | null;
  npmRegistry: string;
  /** A directory of wheels on the worker's host (pip's --find-links). */
  wheelsDir: string | null;
  /** A CA bundle (PEM) on the worker's host that pip and npm trust besides the image's. */
  caFile: string | null;
}

/**
 * Bumped whenever the Dockerfile made of a spec changes: every template is then built again on its next request, and
 * no image made the old way is taken for one made the new way.
 */
export const TEMPLATE_FORMAT = 1;

/** The parts of a recipe that go into its image, on `base` (files as base64, in the recipe's order). */
export function imageSpecOf(recipe: TemplateRecipe, base: string, fileBytes: (i: number) => Buffer): TemplateImageSpec {
  return {
    base,
    debian_packages: recipe.debian_packages ?? [],
    python_packages: recipe.python_packages ?? [],
    npm_packages: recipe.npm_packages ?? [],
    files: (recipe.files ?? []).map((f, i) => ({
      path: f.path,
      mode: (f.mode ?? '0644').padStart(4, '0'),
      content_base64: fileBytes(i).toString('base64'),
    })),
    setup: recipe.setup ?? null,
  };
}

/**
 * The hash a template's image is known by: of its spec, of where its packages come from, and of the format of the
 * Dockerfile made of them. An unchanged recipe has an unchanged hash, so it is not built again.
 */
export function recipeHash(spec: TemplateImageSpec, s: Omit<TemplateBuildSettings, 'caFile'>): string {
  const sources = {
    pip: spec.python_packages.length > 0 ? { index: s.pipIndexUrl, wheels: s.wheelsDir } : null,
    npm: spec.npm_packages.length > 0 ? s.npmRegistry : null,
  };
  return createHash('sha256')
    .update(JSON.stringify({ format: TEMPLATE_FORMAT, spec, sources }))
    .digest('hex');
}

/** Labels of a template image: the hash it was built for, and the id of the image it was built on. */
export const TEMPLATE_IMAGE_LABELS = {
  hash: 'org.sandgate.template.hash',
  base: 'org.sandgate.template.base-id',
  deployment: 'org.sandgate.deployment',
} as const;

/**
 * The reference of a template's image on the engine: one repository per deployment, tagged with the recipe's hash
 * (so an image is never shared between deployments, and a new recipe never replaces an image sessions run).
 */
export function templateImageRef(deployment: string, hash: string): string {
  const repo =
    deployment
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '') || 'sandgate';
  return `sandgate-template/${repo}:${hash.slice(0, 24)}`;
}
