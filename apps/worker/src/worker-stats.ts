import type { BackendHealth, BackendStats, ExecutionBackend, TemplatePoolFigures } from '@sandgate/backends';
import {
  redisErrorCount,
  type CounterName,
  type DeploymentStats,
  type Labels,
  type WorkerRegistry,
  type WorkerSnapshot,
} from '@sandgate/state';

export interface WorkerStatsOptions {
  id: string;
  backend: ExecutionBackend;
  registry: WorkerRegistry;
  stats: DeploymentStats;
  concurrency: number;
  /** Runs the worker holds now. */
  running: () => number;
  /** Whether it takes runs now (see EngineGate). */
  takingRuns: () => boolean;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/** How long a probe of the backend may take: within a heartbeat's 5 s, past a busy engine's latency spikes. */
export const HEALTH_TIMEOUT_MS = 3000;

type Totals = Record<string, number>;
const COUNTERS: [string, CounterName, Labels][] = [
  ['hit', 'pool', { event: 'hit' }],
  ['miss', 'pool', { event: 'miss' }],
  ['reuse', 'pool', { event: 'reuse' }],
  ['reset_failed', 'pool', { event: 'reset_failed' }],
  ['engine', 'engine_errors', {}],
  ['redis', 'redis_errors', {}],
];

/**
 * A worker's heartbeat with its numbers: it stamps the worker alive with a snapshot of its gauges (runs held, warm
 * sandboxes, session sandboxes on its engine), and adds what its counters grew by since the last beat to the
 * deployment's totals, so that any gateway reports every worker and nothing is lost when a worker goes away.
 */
export class WorkerStats {
  /** Engine failures seen by this worker (a run's, a sweep's, a stats read's). */
  engineErrors = 0;
  /** Told what each probe of the backend found (whether or not it changed). */
  onHealth: ((health: BackendHealth) => void) | undefined;
  #backend: BackendStats | undefined;
  /** What the last probe of the backend found; undefined until one has answered. */
  #health: BackendHealth | undefined;
  #probing: Promise<void> | null = null;
  #stopped = false;
  #sent: Totals = {};
  #refreshing = false;

  readonly #o: WorkerStatsOptions;
  constructor(o: WorkerStatsOptions) {
    this.#o = o;
  }

  /**
   * Stamps the heartbeat with the numbers known now, then probes the backend and refreshes the numbers from the engine
   * in the background: the heartbeat never waits for an engine that is slow to answer (a late heartbeat would make
   * the worker look dead).
   */
  async beat(): Promise<void> {
    if (this.#stopped) return;
    await this.#o.registry.beat(this.#o.id, this.#snapshot());
    this.probe();
    void this.#refresh();
  }

  /** Stamps the heartbeat with the numbers known now (a change the stats should show before the next beat). */
  async stamp(): Promise<void> {
    if (!this.#stopped) await this.#o.registry.beat(this.#o.id, this.#snapshot());
  }

  /** Probes the backend now (unless a probe is under way): a run that just failed on the engine asks for one. */
  probe(): void {
    if (this.#stopped) return;
    this.#probing ??= this.#probe()
      .catch((err: unknown) => this.#o.log.warn({ err }, 'could not probe the backend'))
      .finally(() => {
        this.#probing = null;
      });
  }

  /** No stamp after this resolves, so that the worker's goodbye (WorkerRegistry.leave) is its last word. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#probing;
  }

  #snapshot(): WorkerSnapshot {
    const b = this.#backend;
    const h = this.#health;
    return {
      concurrency: this.#o.concurrency,
      running: this.#o.running(),
      taking_runs: this.#o.takingRuns(),
      pool_ready: b?.pool.ready ?? 0,
      ...(b?.templatePools?.length
        ? { template_pools_ready: Object.fromEntries(b.templatePools.map((p) => [p.template, p.ready])) }
        : {}),
      session_sandboxes: b?.sessionSandboxes ?? 0,
      engine: b?.engine ?? '',
      backend: this.#o.backend.name,
      backend_state: h === undefined ? 'unknown' : h.usable ? 'usable' : 'unusable',
      ...(h?.reason !== undefined ? { backend_reason: h.reason } : {}),
    };
  }

  /**
   * Asks the backend whether it can run sandboxes (bounded by HEALTH_TIMEOUT_MS). A change is stamped at once rather
   * than with the next heartbeat, so /readyz follows the engine within a probe, and is logged for the operator.
   */
  async #probe(): Promise<void> {
    const health: BackendHealth = (await this.#o.backend.health?.(HEALTH_TIMEOUT_MS)) ?? { usable: true };
    const before = this.#health;
    this.#health = health;
    this.onHealth?.(health);
    if (before?.usable === health.usable && before.reason === health.reason) return;
    const backend = this.#o.backend.name;
    if (health.usable) this.#o.log.info({ backend }, 'backend usable');
    else this.#o.log.warn({ backend, reason: health.reason }, 'backend unusable: runs fail with backend_unavailable');
    await this.stamp();
  }

  async #refresh(): Promise<void> {
    if (this.#refreshing || !this.#o.backend.stats) return;
    this.#refreshing = true;
    try {
      this.#backend = await this.#o.backend.stats();
    } catch (err) {
      this.engineErrors++;
      this.#o.log.warn({ err }, 'could not read the backend stats');
    }
    try {
      await this.#publish();
    } catch (err) {
      // Not marked sent: the next beat adds the growth again.
      this.#o.log.warn({ err }, 'could not publish the worker counters');
    } finally {
      this.#refreshing = false;
    }
  }

  async #publish(): Promise<void> {
    const p = this.#backend?.pool;
    const sent = this.#sent;
    const now: Totals = {
      hit: p?.hits ?? sent.hit ?? 0,
      miss: p?.misses ?? sent.miss ?? 0,
      reuse: p?.reused ?? sent.reuse ?? 0,
      reset_failed: p?.reset_failed ?? sent.reset_failed ?? 0,
      engine: this.engineErrors,
      redis: redisErrorCount(),
    };
    // Each template's pool counts beside the runtime image's, with a `template` label.
    const events: [string, string, keyof Omit<TemplatePoolFigures, 'template' | 'ready'>][] = [
      ['hit', 'hit', 'hits'],
      ['miss', 'miss', 'misses'],
      ['reuse', 'reuse', 'reused'],
      ['reset_failed', 'reset_failed', 'reset_failed'],
    ];
    const perTemplate: [CounterName, Labels, string][] = [];
    for (const t of this.#backend?.templatePools ?? []) {
      for (const [key, event, field] of events) {
        const id = `${key}:${t.template}`;
        now[id] = t[field];
        perTemplate.push(['pool', { event, template: t.template }, id]);
      }
    }
    await this.#o.stats.add([
      ...COUNTERS.map(([key, name, labels]): [CounterName, Labels, number] => [
        name,
        labels,
        now[key]! - (this.#sent[key] ?? 0),
      ]),
      ...perTemplate.map(([name, labels, id]): [CounterName, Labels, number] => [
        name,
        labels,
        now[id]! - (this.#sent[id] ?? 0),
      ]),
    ]);
    this.#sent = now;
  }
}
