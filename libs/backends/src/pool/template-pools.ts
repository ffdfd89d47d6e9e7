import type { BackendLogger } from '../logger.ts';
import { poolFigures, type PoolMember, type PoolStats, type SandboxPool } from './sandbox-pool.ts';

/** A template's warm pool, as the worker asks a backend to keep it (from the templates in Redis). */
export interface TemplatePoolSpec {
  template: string;
  /** Its image, as the gateway resolves the template for runs: runs of this image take from this pool. */
  image: string;
  /** Warm sandboxes kept ready; 0 keeps none ready, but still reuses a reset sandbox for its tenant's next one-shot. */
  size: number;
  /** Memory and CPUs its sandboxes are made with: the template's default limits. */
  limits: { memory_mb: number; cpus: number };
}

/** A template pool's figures, as a backend reports them (BackendStats.templatePools). */
export interface TemplatePoolFigures extends ReturnType<typeof poolFigures> {
  template: string;
}

const same = (a: TemplatePoolSpec, b: TemplatePoolSpec) =>
  a.template === b.template &&
  a.size === b.size &&
  a.limits.memory_mb === b.limits.memory_mb &&
  a.limits.cpus === b.limits.cpus;

/**
 * The warm pools of templates, by image: one SandboxPool each, made by the backend (`make`), kept in step with the
 * templates the worker reads (`set`). A run of a template this worker has not heard of yet gets a pool of size 0 made
 * on the spot (`for`), so its sandbox is still reused within its tenant; the next `set` settles it.
 */
export class TemplatePools<T extends PoolMember, P extends SandboxPool<T>> {
  readonly #pools = new Map<string, { spec: TemplatePoolSpec; pool: P }>();
  readonly #closing = new Set<Promise<void>>();
  /** Totals of the pools closed since this was made, so that counters never go back. */
  readonly #gone = new Map<string, PoolStats>();
  #closed = false;

  readonly #make: (spec: TemplatePoolSpec) => P;
  readonly #log: BackendLogger;
  constructor(make: (spec: TemplatePoolSpec) => P, log: BackendLogger) {
    this.#make = make;
    this.#log = log;
  }

  /** Makes the pools of `specs`, remakes those whose size or limits changed, and closes the rest. */
  set(specs: TemplatePoolSpec[]): void {
    if (this.#closed) return;
    const wanted = new Map(specs.map((s) => [s.image, s]));
    for (const [image, { spec }] of this.#pools) {
      const want = wanted.get(image);
      if (want === undefined || !same(want, spec)) this.#drop(image);
    }
    for (const [image, spec] of wanted) {
      if (this.#pools.has(image)) continue;
      this.#pools.set(image, { spec, pool: this.#make(spec) });
      if (spec.size > 0) this.#log.info({ template: spec.template, image, size: spec.size }, 'template pool');
    }
  }

  /** The pool of a run's image; one of size 0 is made for an image not heard of yet (`limits`: the run's). */
  for(image: string, template: string, limits: TemplatePoolSpec['limits']): P | undefined {
    if (this.#closed) return undefined;
    const found = this.#pools.get(image);
    if (found) return found.pool;
    const spec = { template, image, size: 0, limits };
    const pool = this.#make(spec);
    this.#pools.set(image, { spec, pool });
    return pool;
  }

  get(image: string): P | undefined {
    return this.#pools.get(image)?.pool;
  }

  /** Every template's pool figures: the pools kept now, plus the counts of those closed before. */
  figures(): TemplatePoolFigures[] {
    const by = new Map<string, PoolStats>(this.#gone);
    for (const { spec, pool } of this.#pools.values()) by.set(spec.template, add(by.get(spec.template), pool.stats()));
    return [...by].map(([template, s]) => ({ template, ...poolFigures(s) }));
  }

  /** Resolves once every template pool is full. */
  async whenReady(): Promise<void> {
    await Promise.all([...this.#pools.values()].map(({ pool }) => pool.whenReady()));
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const image of [...this.#pools.keys()]) this.#drop(image);
    await Promise.allSettled([...this.#closing]);
  }

  #drop(image: string): void {
    const entry = this.#pools.get(image);
    if (!entry) return;
    this.#pools.delete(image);
    const s = entry.pool.stats();
    this.#gone.set(
      entry.spec.template,
      add(this.#gone.get(entry.spec.template), { ...s, size: 0, ready: 0, starting: 0, recycled: 0 }),
    );
    const closing = entry.pool.close().catch((err: unknown) => {
      this.#log.warn({ template: entry.spec.template, err }, 'could not close a template pool');
    });
    this.#closing.add(closing);
    void closing.finally(() => this.#closing.delete(closing));
  }
}

/** Two pools' figures added: counters summed, the gauges too (ready, starting, …). */
function add(a: PoolStats | undefined, b: PoolStats): PoolStats {
  if (a === undefined) return b;
  return {
    hits: a.hits + b.hits,
    reused: a.reused + b.reused,
    misses: a.misses + b.misses,
    resetFailed: a.resetFailed + b.resetFailed,
    size: a.size + b.size,
    ready: a.ready + b.ready,
    starting: a.starting + b.starting,
    recycled: a.recycled + b.recycled,
  };
}
