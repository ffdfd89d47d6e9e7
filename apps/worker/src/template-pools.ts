import type { Logger } from 'pino';
import type { ExecutionBackend, TemplatePoolSpec } from '@sandgate/backends';
import type { Config } from '@sandgate/config';
import { createRedis, TemplateStore, type Keys, type LuaRedis, type TemplateRecord } from '@sandgate/state';

/** How often the pools are checked against Redis besides each announced change: a missed message heals by then. */
const REFRESH_MS = 30_000;

/** The pools a worker keeps for the templates it reads: one per image of a usable template (size 0: reuse only). */
export function poolsOf(templates: TemplateRecord[], config: Pick<Config, 'memoryMb' | 'cpus'>): TemplatePoolSpec[] {
  const byImage = new Map<string, TemplatePoolSpec>();
  for (const t of templates) {
    if (t.image === null) continue;
    const spec: TemplatePoolSpec = {
      template: t.name,
      image: t.image,
      size: t.recipe.pool_size ?? 0,
      limits: { memory_mb: t.recipe.limits?.memory_mb ?? config.memoryMb, cpus: t.recipe.limits?.cpus ?? config.cpus },
    };
    // Two templates of one image share its pool: the larger size, the first name (by name).
    const had = byImage.get(t.image);
    if (had === undefined || spec.size > had.size)
      byImage.set(t.image, had ? { ...spec, template: had.template } : spec);
  }
  return [...byImage.values()];
}

/**
 * Keeps the backend's template pools in step with the templates in Redis: read at start, again on every change the
 * gateway or a build announces, and every 30 s. Runs never wait for it: a template this worker has not heard of yet
 * still runs, in a pool made for it on the spot.
 */
export class TemplatePoolSync {
  readonly #store: TemplateStore;
  readonly #subscriber: ReturnType<typeof createRedis>;
  #timer: NodeJS.Timeout | undefined;
  #pending: NodeJS.Timeout | undefined;
  #closed = false;

  readonly #o: { config: Config; log: Logger; backend: ExecutionBackend; redis: LuaRedis; k: Keys };
  constructor(o: { config: Config; log: Logger; backend: ExecutionBackend; redis: LuaRedis; k: Keys }) {
    this.#o = o;
    this.#store = new TemplateStore(o.redis, o.k);
    this.#subscriber = createRedis(o.config, 'sandgate-worker-templates');
  }

  async start(): Promise<void> {
    if (!this.#o.backend.setTemplatePools) return;
    await this.#subscriber.subscribe(this.#store.channel);
    // A burst of changes (a file of templates applied at start) is read once.
    this.#subscriber.on('message', () => {
      this.#pending ??= setTimeout(() => {
        this.#pending = undefined;
        void this.refresh();
      }, 100);
    });
    await this.refresh();
    this.#timer = setInterval(() => void this.refresh(), REFRESH_MS);
  }

  async refresh(): Promise<void> {
    if (this.#closed) return;
    try {
      this.#o.backend.setTemplatePools!(poolsOf(await this.#store.list(), this.#o.config));
    } catch (err) {
      this.#o.log.warn({ err }, 'could not read the templates for their pools');
    }
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#timer);
    clearTimeout(this.#pending);
    this.#subscriber.disconnect();
  }
}
