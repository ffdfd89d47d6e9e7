import type { Redis } from 'ioredis';
import type { ExecutionResult } from '@sandgate/contracts';
import type { Keys } from './keys.ts';

export type Labels = Record<string, string>;

/** Upper bounds (seconds) of the run duration histogram's buckets. */
export const DURATION_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
/** Upper bounds (seconds) of the queue wait histogram's buckets. */
export const QUEUE_WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** The counters kept for the whole deployment; the histograms are `duration` and `queue_wait`. */
export type CounterName = 'executions' | 'pool' | 'engine_errors' | 'redis_errors';
export type HistogramName = 'duration' | 'queue_wait';

export interface CounterValue {
  labels: Labels;
  value: number;
}
export interface HistogramValue {
  labels: Labels;
  /** Cumulative counts per upper bound, `+Inf` last, as Prometheus wants them. */
  buckets: { le: string; count: number }[];
  sum: number;
  count: number;
}

export interface StatsSnapshot {
  counters: Map<CounterName, CounterValue[]>;
  histograms: Map<HistogramName, HistogramValue[]>;
}

const BUCKETS: Record<HistogramName, number[]> = { duration: DURATION_BUCKETS, queue_wait: QUEUE_WAIT_BUCKETS };

/** `name|k=v|k=v`: label values here are states, reasons, languages and event names, which hold neither `|` nor `=`. */
const encode = (name: string, labels: Labels) =>
  [name, ...Object.entries(labels).map(([k, v]) => `${k}=${v}`)].join('|');
function decode(field: string): { name: string; labels: Labels } {
  const [name, ...pairs] = field.split('|');
  return {
    name: name!,
    labels: Object.fromEntries(pairs.map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)])),
  };
}

/**
 * One observation of a histogram, as the scripts that end a run or start it record it in the same step (sgFinalize,
 * sgMarkRunning): the histogram's hash, the series (its labels, encoded), the bucket the value falls in, the value.
 */
export interface Observation {
  key: string;
  series: string;
  le: string;
  seconds: number;
}

/** Lua: records an Observation given as (key, series, le, seconds), as `observe` below does. */
export const OBSERVE_LUA = `
  local function observe(key, series, le, seconds)
    redis.call('HINCRBY', key, series .. '#' .. le, 1)
    redis.call('HINCRBYFLOAT', key, series .. '#sum', seconds)
    redis.call('HINCRBY', key, series .. '#count', 1)
  end`;

/**
 * Counters and histograms of the whole deployment, kept in Redis so that every process adds to the same numbers and
 * any gateway reports all of them: runs ended (by whichever process ended them), their durations and queue waits,
 * and the deltas workers publish with their heartbeat (pool events, engine and Redis errors). Totals run from the
 * first use of this Redis (prefix); they are not reset when a process restarts.
 */
export class DeploymentStats {
  readonly #redis: Redis;
  readonly #k: Keys;
  constructor(redis: Redis, k: Keys) {
    this.#redis = redis;
    this.#k = k;
  }

  /** A run ended: counted by state and reason, its duration observed by language and state. */
  async ended(language: string, result: ExecutionResult): Promise<void> {
    const m = this.#redis.multi();
    m.hincrby(this.#k.statsCounters(), this.endedCounter(result), 1);
    this.#observe(m, this.endedDuration(language, result));
    await m.exec();
  }

  /** A run waited `ms` in the queue before a worker started it. */
  async queueWait(ms: number): Promise<void> {
    const m = this.#redis.multi();
    this.#observe(m, this.queueWaitOf(ms));
    await m.exec();
  }

  /** The field of the `executions` counter a run that ended so counts in. */
  endedCounter(result: ExecutionResult): string {
    return encode('executions', { state: result.state, reason: result.reason ?? '' });
  }

  /** The observation of an ended run's duration, by language and state. */
  endedDuration(language: string, result: ExecutionResult): Observation {
    return this.#observation('duration', { language, state: result.state }, result.duration_ms / 1000);
  }

  /** The observation of a run's wait in the queue (`ms`) before a worker started it. */
  queueWaitOf(ms: number): Observation {
    return this.#observation('queue_wait', {}, ms / 1000);
  }

  /** Adds counter deltas, e.g. `[['pool', { event: 'hit' }, 3]]`; zero deltas are skipped. */
  async add(deltas: [CounterName, Labels, number][]): Promise<void> {
    const nonZero = deltas.filter(([, , n]) => n !== 0);
    if (nonZero.length === 0) return;
    const m = this.#redis.multi();
    for (const [name, labels, n] of nonZero) m.hincrby(this.#k.statsCounters(), encode(name, labels), n);
    await m.exec();
  }

  #observation(name: HistogramName, labels: Labels, seconds: number): Observation {
    const le = BUCKETS[name].find((b) => seconds <= b);
    return { key: this.#k.statsHistogram(name), series: encode('', labels), le: String(le ?? '+Inf'), seconds };
  }

  #observe(m: ReturnType<Redis['multi']>, { key, series, le, seconds }: Observation): void {
    m.hincrby(key, `${series}#${le}`, 1).hincrbyfloat(key, `${series}#sum`, seconds).hincrby(key, `${series}#count`, 1);
  }

  async read(): Promise<StatsSnapshot> {
    const [counters, duration, wait] = await Promise.all([
      this.#redis.hgetall(this.#k.statsCounters()),
      this.#redis.hgetall(this.#k.statsHistogram('duration')),
      this.#redis.hgetall(this.#k.statsHistogram('queue_wait')),
    ]);
    const byName = new Map<CounterName, CounterValue[]>();
    for (const [field, value] of Object.entries(counters)) {
      const { name, labels } = decode(field);
      const list = byName.get(name as CounterName) ?? [];
      list.push({ labels, value: Number(value) });
      byName.set(name as CounterName, list);
    }
    return {
      counters: byName,
      histograms: new Map([
        ['duration', histogram(duration, DURATION_BUCKETS)],
        ['queue_wait', histogram(wait, QUEUE_WAIT_BUCKETS)],
      ]),
    };
  }
}

/** The stored per-bucket counts of one histogram → cumulative series per label set. */
function histogram(hash: Record<string, string>, bounds: number[]): HistogramValue[] {
  const series = new Map<string, Record<string, number>>();
  for (const [field, value] of Object.entries(hash)) {
    const at = field.lastIndexOf('#');
    const one = series.get(field.slice(0, at)) ?? {};
    one[field.slice(at + 1)] = Number(value);
    series.set(field.slice(0, at), one);
  }
  return [...series].map(([base, v]) => {
    let running = 0;
    const buckets = [...bounds.map(String), '+Inf'].map((le) => ({ le, count: (running += v[le] ?? 0) }));
    return { labels: decode(base).labels, buckets, sum: v.sum ?? 0, count: v.count ?? 0 };
  });
}
