import { Redis, type RedisOptions as IORedisOptions } from 'ioredis';

/**
 * Where Redis is: a URL, or sandgate's configuration (its REDIS_URL and, when set, the sentinels that say which server
 * is the primary). Every connection a process makes is created from the same target.
 */
export type RedisTarget =
  | string
  | {
      redisUrl: string;
      redisSentinels?: readonly { host: string; port: number }[];
      redisSentinelName?: string;
      redisSentinelPassword?: string | null;
    };

export interface RedisOptions {
  /** Batch our own commands of one tick into one write; default true. Off for BullMQ's connections (see below). */
  autoPipelining?: boolean;
  /**
   * For connections that serve HTTP requests: a command fails at once while Redis is unreachable instead of waiting
   * for a reconnect, fails after REDIS_REQUEST_TIMEOUT_MS when Redis does not answer, and is never sent again after
   * a reconnect (the client was already told it failed). Default false: wait for Redis, as workers should.
   */
  failFast?: boolean;
}

/**
 * How long a request-path command waits for Redis's answer before its request fails with redis_unavailable. Long
 * enough for a burst of requests queued behind each other on one connection; a Redis that hangs is caught sooner by
 * the RedisWatchdog, which fails new requests at once.
 */
export const REDIS_REQUEST_TIMEOUT_MS = 5000;
/**
 * Redis is taken for hung when the watchdog's PINGs go unanswered this long: past the latency spikes of a loaded host
 * (a Redis starved of CPU by the sandboxes beside it answered a PING in over 600 ms on a 2-core machine), well short
 * of REDIS_REQUEST_TIMEOUT_MS.
 */
export const REDIS_HANG_MS = 2000;
const WATCHDOG_EVERY_MS = 200;
/** The watchdog's timer running this much later than due means the process's event loop was held up. */
const STALL_MS = 3 * WATCHDOG_EVERY_MS;

let errors = 0;

/** Connection and command errors of every connection this process made, for sandgate_redis_errors_total. */
export const redisErrorCount = (): number => errors;

/**
 * A Redis connection. By default `maxRetriesPerRequest: null`, because BullMQ's workers require it and because a
 * worker's command should wait for a reconnect rather than lose a run's result during a Redis restart; `failFast`
 * connections answer an HTTP request in bounded time instead.
 * Auto-pipelining batches our own commands of one tick into one write; it is off for BullMQ's connections
 * (`{ autoPipelining: false }`), where ioredis would copy BullMQ's ~60 scripts into every pipeline it builds,
 * costing more CPU than the batching saves.
 */
export function createRedis(
  target: RedisTarget,
  name: string,
  { autoPipelining = true, failFast = false }: RedisOptions = {},
): Redis {
  const options: IORedisOptions = {
    connectionName: name,
    enableAutoPipelining: autoPipelining,
    lazyConnect: false,
    ...(failFast
      ? {
          maxRetriesPerRequest: 0,
          enableOfflineQueue: false,
          autoResendUnfulfilledCommands: false,
          commandTimeout: REDIS_REQUEST_TIMEOUT_MS,
        }
      : { maxRetriesPerRequest: null }),
  };
  const url = typeof target === 'string' ? target : target.redisUrl;
  const sentinels = typeof target === 'string' ? [] : (target.redisSentinels ?? []);
  const redis =
    sentinels.length === 0
      ? new Redis(url, options)
      : new Redis({ ...options, ...sentinelOptions(url, sentinels, target as Exclude<RedisTarget, string>, failFast) });
  // Counted, not printed: ioredis would print every failed reconnect of an outage; the processes log the outage once.
  redis.on('error', () => {
    errors++;
  });
  return redis;
}

/**
 * A connection through Redis Sentinel: ioredis asks the sentinels for the primary's address at every (re)connect and
 * checks the server it reached is a primary (`role: 'master'`), so after a failover it reconnects to the new one.
 * A primary demoted while alive (a manual failover, a partition healed) has its clients killed by the sentinels that
 * reconfigure it; a write it refuses with READONLY meanwhile makes the connection reconnect (`reconnectOnError`).
 * No `failoverDetector`: its `+switch-master` message, arriving while a connection is between servers, made ioredis
 * end that connection for good (a BullMQ worker then took no job again: docs/adr/0014-redis-sentinel.md).
 * Duplicates (BullMQ's blocking connections, subscribers) keep these options.
 */
function sentinelOptions(
  url: string,
  sentinels: readonly { host: string; port: number }[],
  target: Exclude<RedisTarget, string>,
  failFast: boolean,
): IORedisOptions {
  // REDIS_URL still gives the nodes' credentials and database; its host and port are the sentinels' to say.
  const u = new URL(url);
  const db = Number(u.pathname.replace(/^\//, '') || '0');
  return {
    sentinels: sentinels.map(({ host, port }) => ({ host, port })),
    name: target.redisSentinelName ?? 'mymaster',
    role: 'master',
    ...(target.redisSentinelPassword ? { sentinelPassword: target.redisSentinelPassword } : {}),
    ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    db,
    // Every sentinel is tried in turn, then again after this long, for as long as it takes (the default gives up
    // never either, but grows to 1 s between rounds).
    sentinelRetryStrategy: (attempt: number) => Math.min(attempt * 100, 1000),
    // A write the server refused because it is now a replica was not applied: reconnect (to the primary the sentinels
    // name) and, where commands wait for Redis, send it again there. Request-path commands fail instead: 503.
    reconnectOnError: (err: Error) => (/^READONLY/.test(err.message) ? (failFast ? 1 : 2) : false),
  };
}

/** Resolves once `redis` is connected (at once if it is); rejects only if it is closed for good. */
export function whenReady(redis: Redis): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const ready = () => {
      redis.off('end', end);
      resolve();
    };
    const end = () => {
      redis.off('ready', ready);
      reject(new Error('the Redis connection was closed'));
    };
    redis.once('ready', ready);
    redis.once('end', end);
  });
}

type OutageLog = { warn(o: object, m: string): void; info(o: object, m: string): void };

/**
 * Logs when `redis` loses its connection and when it has it back: once per outage, not once per retry. Call the
 * function it returns before closing the connection on purpose.
 */
export function watchOutages(redis: Redis, log: OutageLog): () => void {
  let lostAt: number | null = null;
  let watching = true;
  redis.on('close', () => {
    if (lostAt !== null || !watching) return;
    lostAt = Date.now();
    const connection = redis.options.connectionName;
    log.warn({ connection }, 'lost the connection to Redis; requests answer 503 until it is back');
  });
  redis.on('ready', () => {
    if (lostAt === null) return;
    log.info({ connection: redis.options.connectionName, down_ms: Date.now() - lostAt }, 'connected to Redis again');
    lostAt = null;
  });
  return () => {
    watching = false;
  };
}

const UNAVAILABLE = [
  /Stream isn't writeable/,
  /Command timed out/,
  /Connection is closed/,
  /Reached the max retries per request limit/,
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EHOSTUNREACH/,
  /LOADING Redis is loading/,
  // A primary demoted by a failover, until the connection has moved to the new one.
  /^READONLY /,
  /All sentinels are unreachable/,
];

/** True for an error that says Redis could not be reached or did not answer (not one Redis answered with). */
export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'MaxRetriesPerRequestError') return true;
  return UNAVAILABLE.some((re) => re.test(err.message));
}

/**
 * Whether Redis answers right now, from a PING every 200 ms on a connection of its own (so a burst of requests'
 * commands never delays it): down while the connection is not ready, or once a PING has gone unanswered for
 * REDIS_HANG_MS of this process's own running time (a Redis that hangs with its connections open).
 *
 * The wait is counted from the first PING with no PONG since: a PING that times out (the connection's command
 * timeout) and the next one sent do not restart it. Time this process itself was stalled (a gateway building its
 * routes, a synchronous call, a starved CPU) does not count: a PONG may be waiting, unread, behind the stall, and a
 * PING sent after the stall is fresh however old the last PONG. Once taken for hung, Redis stays down until a PONG
 * comes back, so a stall of the process then cannot let requests through to a Redis that hangs.
 * Requests check it before they send anything to Redis.
 */
export class RedisWatchdog {
  /** When the first PING that has had no PONG since went out; null when the last PING was answered. */
  #waitingSince: number | null = null;
  /** How long this process was stalled since #waitingSince: not counted as waiting. */
  #stalledMs = 0;
  /** Taken for hung: stays so until a PONG (or a new connection). */
  #hung = false;
  #inFlight = false;
  /** When the timer last ran: much longer ago than its period, this process itself was stalled. */
  #lastTick = Date.now();
  readonly #timer: NodeJS.Timeout;

  readonly #redis: Redis;
  constructor(redis: Redis) {
    this.#redis = redis;
    redis.on('ready', () => this.#answered());
    this.#timer = setInterval(() => {
      const now = Date.now();
      // A tick this late means the process was held up (timer jitter on a busy host is not counted).
      const gap = now - this.#lastTick;
      if (gap > STALL_MS && this.#waitingSince !== null) this.#stalledMs += gap - WATCHDOG_EVERY_MS;
      this.#lastTick = now;
      if (redis.status !== 'ready' || this.#inFlight) return;
      this.#inFlight = true;
      this.#waitingSince ??= now;
      redis.ping().then(
        () => {
          this.#inFlight = false;
          this.#answered();
        },
        () => {
          this.#inFlight = false;
        },
      );
    }, WATCHDOG_EVERY_MS);
    this.#timer.unref();
  }

  #answered(): void {
    this.#waitingSince = null;
    this.#stalledMs = 0;
    this.#hung = false;
  }

  get up(): boolean {
    if (this.#redis.status !== 'ready' || this.#hung) return false;
    if (this.#waitingSince === null) return true;
    const now = Date.now();
    // The timer is late: this process is stalled now, and a PONG may be waiting behind the stall.
    if (now - this.#lastTick > STALL_MS) return true;
    this.#hung = now - this.#waitingSince - this.#stalledMs >= REDIS_HANG_MS;
    return !this.#hung;
  }

  close(): void {
    clearInterval(this.#timer);
    this.#redis.disconnect();
  }
}
