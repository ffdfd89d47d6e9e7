import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import { Gauge, Histogram, Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import { BACKEND_STATES } from '@sandgate/contracts';
import { DeploymentStats, redisErrorCount, type HistogramValue, type Keys, type Labels } from '@sandgate/state';
import type { DeploymentView, SystemStatsReader } from './core/system-stats.ts';

type Value = { value: number; labels?: Labels; metricName?: string };
type Kind = 'counter' | 'gauge' | 'histogram';

/** How often a gateway publishes what only it knows (SSE subscribers, its Redis errors). */
const BEAT_MS = 5000;

/**
 * /metrics in Prometheus text. This process's own numbers (HTTP latency, SSE subscribers, Node's process metrics)
 * come from prom-client; the deployment's (queue, runs, pool, sessions, workers, engine and Redis errors) are read
 * from Redis at scrape time, so they are the same on every gateway: scrape one, or aggregate them with max().
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly id = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  readonly #http: Histogram<'method' | 'route' | 'status_code'>;
  readonly #deployment: DeploymentStats;
  #sse = 0;
  #sent = 0;
  #timer: NodeJS.Timeout | undefined;

  readonly #reader: SystemStatsReader;
  readonly #redis: Redis;
  readonly #k: Keys;
  constructor(reader: SystemStatsReader, redis: Redis, k: Keys) {
    this.#reader = reader;
    this.#redis = redis;
    this.#k = k;
    this.#deployment = new DeploymentStats(redis, k);
    collectDefaultMetrics({ register: this.registry });
    this.#http = new Histogram({
      name: 'sandgate_http_request_duration_seconds',
      help: 'HTTP requests by route and status, until the response ended',
      labelNames: ['method', 'route', 'status_code'],
      registers: [this.registry],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    });
    const subscribers = () => this.#sse;
    new Gauge({
      name: 'sandgate_sse_subscribers',
      help: "Clients following an execution's events on this gateway",
      registers: [this.registry],
      collect() {
        this.set(subscribers());
      },
    });
    this.#registerDeployment();
  }

  /** One HTTP request ended; `route` is the route's pattern (`/v1/executions/:id`), never the raw URL. */
  observeRequest(method: string, route: string | undefined, statusCode: number, seconds: number): void {
    this.#http.observe({ method, route: route ?? 'unmatched', status_code: String(statusCode) }, seconds);
  }

  sseOpened(): void {
    this.#sse++;
  }
  sseClosed(): void {
    this.#sse--;
  }

  /** Publishes this gateway's SSE count and Redis errors every few seconds, until close(). */
  start(): void {
    const beat = () => void this.#beat().catch(() => {});
    beat();
    this.#timer = setInterval(beat, BEAT_MS);
    this.#timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#redis.hdel(this.#k.gatewayStats(), this.id).catch(() => {});
  }

  async #beat(): Promise<void> {
    await this.#redis.hset(this.#k.gatewayStats(), this.id, JSON.stringify({ at: Date.now(), sse: this.#sse }));
    const errors = redisErrorCount();
    await this.#deployment.add([['redis_errors', {}, errors - this.#sent]]);
    this.#sent = errors;
  }

  /** The deployment-wide series: each renders from the one reading of this scrape; none while Redis is away. */
  #registerDeployment(): void {
    const register = (name: string, help: string, type: Kind, values: (v: DeploymentView | null) => Value[]) => {
      this.registry.registerMetric({
        name,
        help,
        type,
        get: async () => ({
          name,
          help,
          type,
          aggregator: 'sum',
          values: values(await this.#reader.read().catch(() => null)),
        }),
      } as unknown as Metric);
    };
    const add = (name: string, help: string, type: Kind, values: (v: DeploymentView) => Value[]) =>
      register(name, help, type, (v) => (v ? values(v) : []));
    register(
      'sandgate_redis_up',
      "Whether this gateway could read the deployment's numbers from Redis at this scrape",
      'gauge',
      (v) => [{ value: v ? 1 : 0 }],
    );
    add('sandgate_queue_jobs', 'Queued jobs by BullMQ state', 'gauge', (v) =>
      Object.entries(v.stats.queue).map(([state, value]) => ({ value, labels: { state } })),
    );
    add('sandgate_queue_wait_seconds', 'Time from enqueue to a worker starting the run', 'histogram', (v) =>
      histogramValues('sandgate_queue_wait_seconds', v.histograms.get('queue_wait') ?? []),
    );
    add('sandgate_executions_total', "Runs ended, by state and reason (empty: the code's own ending)", 'counter', (v) =>
      (v.counters.get('executions') ?? []).map(({ labels, value }) => ({ value, labels })),
    );
    add('sandgate_execution_duration_seconds', 'Duration of ended runs by language and state', 'histogram', (v) =>
      histogramValues('sandgate_execution_duration_seconds', v.histograms.get('duration') ?? []),
    );
    add(
      'sandgate_pool_events_total',
      "One-shot runs by what the warm pool did: hit, miss, reuse, reset_failed (a template's pool: its `template`)",
      'counter',
      (v) => (v.counters.get('pool') ?? []).map(({ labels, value }) => ({ value, labels })),
    );
    add('sandgate_pool_ready', 'Warm sandboxes ready, over every live worker', 'gauge', (v) => [
      { value: v.stats.pool.ready },
    ]);
    add(
      'sandgate_template_pool_ready',
      "Sandboxes ready in a template's warm pool, over every live worker",
      'gauge',
      (v) => Object.entries(v.stats.pool.templates).map(([template, t]) => ({ value: t.ready, labels: { template } })),
    );
    add('sandgate_session_sandboxes', 'Session sandboxes running, over every engine', 'gauge', (v) => [
      { value: v.stats.sessions.sandboxes },
    ]);
    add('sandgate_live_sessions', 'Sessions whose idle TTL has not run out', 'gauge', (v) => [
      { value: v.stats.sessions.live },
    ]);
    add('sandgate_workers_alive', 'Workers with a heartbeat in the last 15 s', 'gauge', (v) => [
      { value: v.workers.length },
    ]);
    add(
      'sandgate_workers_by_backend_state',
      'Live workers by whether their execution backend can run sandboxes: usable, unusable, unknown (not probed yet)',
      'gauge',
      (v) =>
        BACKEND_STATES.map((state) => ({
          value: v.workers.filter((w) => w.backend_state === state).length,
          labels: { state },
        })),
    );
    add('sandgate_running_executions', 'Runs held by a worker now', 'gauge', (v) => [
      { value: v.stats.executions.running },
    ]);
    const total = (name: 'engine_errors' | 'redis_errors') => (v: DeploymentView) => [
      { value: (v.counters.get(name) ?? []).reduce((n, c) => n + c.value, 0) },
    ];
    add('sandgate_engine_errors_total', 'Sandbox engine failures seen by workers', 'counter', total('engine_errors'));
    add(
      'sandgate_redis_errors_total',
      'Redis connection and command errors seen by gateways and workers',
      'counter',
      total('redis_errors'),
    );
  }
}

/** Stored histogram series → Prometheus `_bucket`, `_sum` and `_count` lines. */
function histogramValues(name: string, series: HistogramValue[]): Value[] {
  const out: Value[] = [];
  for (const s of series) {
    for (const b of s.buckets)
      out.push({ metricName: `${name}_bucket`, labels: { ...s.labels, le: b.le }, value: b.count });
    out.push(
      { metricName: `${name}_sum`, labels: s.labels, value: s.sum },
      { metricName: `${name}_count`, labels: s.labels, value: s.count },
    );
  }
  return out;
}
