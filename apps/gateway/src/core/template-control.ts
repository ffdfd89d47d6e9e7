import { imageSpecOf, recipeHash } from '@sandgate/backends/templates';
import { SandgateError, type Template, type TemplateRecipe } from '@sandgate/contracts';
import { fileBytes, recipeProblems, recipeSchemaProblems, templateAllowed } from '@sandgate/config';
import type { BuildRecord, SessionTemplate, TemplateRecord } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';

/** Who asks: a tenant sees the templates it may use; an operator sees and manages all. */
export type Viewer = { tenant: string } | { operator: true };

const iso = (ms: number) => new Date(ms).toISOString();
const notFound = (name: string) =>
  new SandgateError('template_not_found', `there is no template "${name}" (GET /v1/templates lists them)`);

/**
 * The operator's templates: declared in SANDGATE_TEMPLATES (applied at start) or made over the API, built by a worker
 * (Docker) or naming their image (Kubernetes), and resolved to an image when a session or a one-shot is made. Free of
 * HTTP: the REST routes and the MCP tools call it.
 */
export class TemplateControl {
  readonly #d: GatewayDeps;
  constructor(d: GatewayDeps) {
    this.#d = d;
  }

  /** The templates `viewer` may see, by name, each brought up to date with its build. */
  async list(viewer: Viewer): Promise<TemplateRecord[]> {
    const all = await Promise.all((await this.#d.templates.list()).map((r) => this.#d.templates.reconcile(r)));
    return all.filter((r) => this.#visible(viewer, r.name));
  }

  /** One template `viewer` may see; template_not_found otherwise (a tenant is not told of others' templates). */
  async require(viewer: Viewer, name: string): Promise<TemplateRecord> {
    const rec = await this.#d.templates.get(name);
    if (!rec || !this.#visible(viewer, name)) throw notFound(name);
    return this.#d.templates.reconcile(rec);
  }

  #visible(viewer: Viewer, name: string): boolean {
    return 'operator' in viewer || templateAllowed(this.#d.config.tenantTemplates, viewer.tenant, name);
  }

  /**
   * Makes or replaces a template. An unchanged recipe keeps its image; a recipe whose image another template has
   * already is ready at once; any other recipe is built by a worker (a build of the same recipe in flight is joined).
   * A template of the file cannot be replaced over the API (`source: 'api'`), only by the file.
   */
  async put(recipe: TemplateRecipe, source: 'file' | 'api'): Promise<TemplateRecord> {
    const { config, templates } = this.#d;
    const schema = recipeSchemaProblems(recipe);
    if (schema.length > 0) {
      throw new SandgateError('validation_failed', `the recipe is not valid: ${schema.join('; ')}`, {
        extra: { errors: schema.map((p) => ({ path: p.split(':')[0]!, message: p })) },
      });
    }
    // What the schema lets through but this deployment refuses (paths, sizes, limits): said, with no `errors` list,
    // which is kept for the schema's own complaints.
    const problems = recipeProblems(recipe, config);
    if (problems.length > 0) {
      throw new SandgateError('validation_failed', `the recipe is not valid: ${problems.join('; ')}`);
    }
    const existing = await templates.get(recipe.name);
    if (source === 'api' && existing?.source === 'file') {
      throw new SandgateError(
        'template_from_file',
        `template "${recipe.name}" is declared in SANDGATE_TEMPLATES; change it there (it is applied at start)`,
      );
    }
    const now = Date.now();
    const base = {
      name: recipe.name,
      recipe,
      source,
      createdAt: existing?.createdAt ?? now,
      updatedAt: now,
      error: null,
      logTail: null,
    };
    let rec: TemplateRecord;
    if (recipe.image !== undefined) {
      rec = {
        ...base,
        hash: recipeHash(this.#spec(recipe), this.#sources()),
        state: 'ready',
        image: recipe.image,
        buildId: null,
      };
    } else {
      const spec = this.#spec(recipe);
      const hash = recipeHash(spec, this.#sources());
      const same = existing && existing.hash === hash && existing.recipe.image === undefined ? existing : undefined;
      const twin =
        same?.state === 'ready' ? same : (await templates.list()).find((t) => t.hash === hash && t.state === 'ready');
      if (same && same.state === 'building') {
        rec = { ...base, hash, state: 'building', image: same.image, buildId: same.buildId };
      } else if (twin) {
        rec = { ...base, hash, state: 'ready', image: twin.image, buildId: twin.buildId };
      } else {
        const { buildId } = await templates.startBuild(hash, spec, (id) =>
          this.#d.builds.add('build', { build_id: id }, { jobId: id }).then(() => undefined),
        );
        // A template that had an image keeps it while the new one builds.
        rec = { ...base, hash, state: 'building', image: existing?.image ?? null, buildId };
      }
    }
    if (!(await templates.put(rec, config.maxTemplates))) {
      throw new SandgateError(
        'max_templates',
        `there are ${config.maxTemplates} templates already (SANDGATE_MAX_TEMPLATES); delete one first`,
      );
    }
    return templates.reconcile(rec);
  }

  /** Deletes a template no live session uses (template_in_use otherwise); its image goes with the next prune. */
  async delete(name: string, source: 'file' | 'api' = 'api'): Promise<void> {
    const rec = await this.#d.templates.get(name);
    if (!rec) throw notFound(name);
    if (source === 'api' && rec.source === 'file') {
      throw new SandgateError(
        'template_from_file',
        `template "${name}" is declared in SANDGATE_TEMPLATES; remove it there (it is applied at start)`,
      );
    }
    const session = (await this.#d.sessions.templatesInUse()).get(name);
    if (session !== undefined) {
      throw new SandgateError(
        'template_in_use',
        `template "${name}" is used by live sessions (${session}, …); delete them or wait for them to expire`,
      );
    }
    await this.#d.templates.delete(name);
    await this.#d.builds.add('prune', {}, { jobId: 'prune', delay: 1000 }).catch(() => undefined);
  }

  /**
   * The template a session or a one-shot of `tenant` is made from, as it is now: template_not_found,
   * template_not_allowed, or template_not_ready (being built for the first time, or its build failed).
   */
  async resolve(tenant: string, name: string): Promise<SessionTemplate> {
    let rec = await this.#d.templates.get(name);
    if (!rec) throw notFound(name);
    if (!templateAllowed(this.#d.config.tenantTemplates, tenant, name)) {
      throw new SandgateError('template_not_allowed', `this tenant may not use template "${name}"`);
    }
    if (rec.image === null) rec = await this.#d.templates.reconcile(rec);
    if (rec.image === null) {
      const why =
        rec.state === 'failed'
          ? `its build failed (${rec.error ?? 'see its log'}); fix its recipe`
          : 'its image is being built; try again once its state is ready';
      const extra = rec.state === 'building' ? { extra: { retry_after: 5 } } : {};
      throw new SandgateError('template_not_ready', `template "${name}" cannot be used yet: ${why}`, extra);
    }
    return { name, image: rec.image, env: rec.recipe.env ?? {}, limits: rec.recipe.limits ?? {} };
  }

  /**
   * Applies the templates file at start: its templates made or updated (built only when their recipe changed), and
   * the templates it used to declare deleted (kept, and said, while a session uses one).
   */
  async applyFile(): Promise<void> {
    const { config, log } = this.#d;
    const declared = new Set(config.templates.map((r) => r.name));
    for (const recipe of config.templates) {
      const rec = await this.put(recipe, 'file');
      log.info({ template: rec.name, state: rec.state, image: rec.image }, 'template from SANDGATE_TEMPLATES');
    }
    for (const rec of await this.#d.templates.list()) {
      if (rec.source !== 'file' || declared.has(rec.name)) continue;
      await this.delete(rec.name, 'file').then(
        () => log.info({ template: rec.name }, 'template no longer in SANDGATE_TEMPLATES: deleted'),
        (err: unknown) => log.warn({ template: rec.name, err }, 'template no longer in SANDGATE_TEMPLATES is kept'),
      );
    }
  }

  /** Waits up to `seconds` for a template's build to end; answers the template as it then is. */
  async wait(rec: TemplateRecord, seconds: number): Promise<TemplateRecord> {
    if (rec.state !== 'building' || rec.buildId === null || seconds <= 0) return rec;
    const stop = AbortSignal.any([AbortSignal.timeout(seconds * 1000), this.#d.draining]);
    const key = this.#d.templates.buildEventsKey(rec.buildId);
    // Reconciled again below in any case: a build lost with its worker sends no result event.
    for await (const ev of this.#d.hub.subscribe(key, null, stop)) if (ev.type === 'result') break;
    return this.#d.templates.reconcile((await this.#d.templates.get(rec.name)) ?? rec);
  }

  /** The API shape of a template, with its latest build as recorded. */
  async show(r: TemplateRecord): Promise<Template> {
    return this.present(r, r.buildId === null ? null : await this.#d.templates.build(r.buildId));
  }

  present(r: TemplateRecord, build: BuildRecord | null): Template {
    const self = `${this.#d.config.publicUrl}/v1/templates/${r.name}`;
    const recipe = r.recipe;
    return {
      name: r.name,
      description: recipe.description ?? '',
      state: r.state,
      source: r.source,
      image: r.image,
      recipe_sha256: r.hash,
      debian_packages: recipe.debian_packages ?? [],
      python_packages: recipe.python_packages ?? [],
      npm_packages: recipe.npm_packages ?? [],
      files: (recipe.files ?? []).map((f) => {
        const bytes = fileBytes(f);
        return { path: f.path, mode: f.mode ?? '0644', size_bytes: typeof bytes === 'string' ? 0 : bytes.length };
      }),
      env: recipe.env ?? {},
      setup: recipe.setup ?? null,
      limits: recipe.limits ?? {},
      pool_size: recipe.pool_size ?? 0,
      build:
        r.buildId === null
          ? null
          : {
              id: r.buildId,
              state: build?.state ?? r.state,
              started_at: build?.startedAt ? iso(build.startedAt) : null,
              finished_at: build?.finishedAt ? iso(build.finishedAt) : null,
              error: build?.error ?? r.error,
              ...(r.state === 'failed' && r.logTail ? { log_tail: r.logTail } : {}),
            },
      created_at: iso(r.createdAt),
      updated_at: iso(r.updatedAt),
      links: { self, build_events: `${self}/build/events` },
    };
  }

  #spec(recipe: TemplateRecipe) {
    return imageSpecOf(recipe, this.#d.config.image, (i) => fileBytes(recipe.files![i]!) as Buffer);
  }

  #sources() {
    const { config } = this.#d;
    return {
      pipIndexUrl: config.templatePipIndexUrl,
      npmRegistry: config.templateNpmRegistry,
      wheelsDir: config.templateWheelsDir,
    };
  }
}
