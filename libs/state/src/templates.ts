import type { Redis } from 'ioredis';
import type { TemplateBuildResultEvent, TemplateImageSpec, TemplateRecipe, TemplateState } from '@sandgate/contracts';
import type { Keys } from './keys.ts';
import { randomHex } from './random-ids.ts';

/** A template as kept: its recipe (files included), where it came from, and what its latest build made. */
export interface TemplateRecord {
  name: string;
  recipe: TemplateRecipe;
  source: 'file' | 'api';
  /** Of what goes into its image (recipeHash in @sandgate/backends/templates). */
  hash: string;
  state: TemplateState;
  /** The image its sandboxes run: the latest good build's (a failed rebuild keeps the one before), or the recipe's. */
  image: string | null;
  /** Its latest build; null for a template that names its image. */
  buildId: string | null;
  error: string | null;
  logTail: string | null;
  createdAt: number;
  updatedAt: number;
}

/** A build as kept: what it builds, and how far it got. Templates of one recipe share it. */
export interface BuildRecord {
  id: string;
  hash: string;
  spec: TemplateImageSpec;
  state: TemplateState;
  startedAt: number | null;
  finishedAt: number | null;
  error: string | null;
}

/** How long a build stays queued before it counts as lost (no worker took it): the queue's patience. */
export const BUILD_QUEUED_TTL_MS = 24 * 3600 * 1000;
/** A worker building renews its build's lease this often; the lease lasts three times as long. */
export const BUILD_LEASE_MS = 30_000;
/** What Redis keeps of a build once it has ended: its log, for people, and its record. */
const BUILD_RETENTION_S = 7 * 86_400;

export const newBuildId = () => `bld_${randomHex(8)}`;

/**
 * Ends a build: its record, every template whose latest build it is (a ready one gets its image), its stream's
 * `result` event, and its lease, in one step. With ARGV[8] = '1' only when its lease is gone (a build whose worker
 * stopped), so a live build is never taken for a lost one.
 * KEYS: templates (set), build, lease, events, changed channel. ARGV: build id, state, image, error, log tail, now,
 * template key prefix, only-if-lost, result event JSON, retention (s).
 */
const FINISH = `
if ARGV[8] == '1' and redis.call('EXISTS', KEYS[3]) == 1 then return -1 end
if redis.call('HGET', KEYS[2], 'state') ~= 'building' then return -1 end
redis.call('HSET', KEYS[2], 'state', ARGV[2], 'finished_at', ARGV[6], 'error', ARGV[4], 'image', ARGV[3],
  'log_tail', ARGV[5])
local changed = 0
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[7] .. name
  if redis.call('HGET', key, 'build_id') == ARGV[1] and redis.call('HGET', key, 'state') == 'building' then
    redis.call('HSET', key, 'state', ARGV[2], 'error', ARGV[4], 'log_tail', ARGV[5], 'updated_at', ARGV[6])
    if ARGV[2] == 'ready' then redis.call('HSET', key, 'image', ARGV[3]) end
    redis.call('PUBLISH', KEYS[5], name)
    changed = changed + 1
  end
end
if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
redis.call('XADD', KEYS[4], '*', 'type', 'result', 'data', ARGV[9])
redis.call('EXPIRE', KEYS[2], ARGV[10])
redis.call('EXPIRE', KEYS[4], ARGV[10])
return changed
`;

/**
 * The operator's templates and their builds, in Redis: a set of names and a hash per template; a build's record and
 * its log (a stream, read as SSE like an execution's events); a lease per recipe hash, held by whoever builds it, so
 * that two builds of one recipe at once are one build. Changes are announced on a channel the workers follow to keep
 * a warm pool per template.
 */
export class TemplateStore {
  readonly #redis: Redis;
  readonly #k: Keys;
  constructor(redis: Redis, k: Keys) {
    this.#redis = redis;
    this.#k = k;
  }

  async names(): Promise<string[]> {
    return (await this.#redis.smembers(this.#k.templates())).sort();
  }

  async get(name: string): Promise<TemplateRecord | null> {
    const h = await this.#redis.hgetall(this.#k.template(name));
    return h.recipe ? recordOf(name, h) : null;
  }

  /** Every template, by name. */
  async list(): Promise<TemplateRecord[]> {
    const names = await this.names();
    const m = this.#redis.multi();
    for (const n of names) m.hgetall(this.#k.template(n));
    const rows = ((await m.exec()) ?? []) as [unknown, Record<string, string>][];
    return names.flatMap((n, i) => (rows[i]?.[1]?.recipe ? [recordOf(n, rows[i]![1])] : []));
  }

  /** Writes a template whole (and announces it); false when it is new and there are `max` already. */
  async put(rec: TemplateRecord, max: number): Promise<boolean> {
    const ok = await this.#redis.eval(
      `if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 and redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then
         return 0 end
       redis.call('SADD', KEYS[1], ARGV[1])
       redis.call('DEL', KEYS[2])
       redis.call('HSET', KEYS[2], unpack(ARGV, 3))
       redis.call('PUBLISH', KEYS[3], ARGV[1])
       return 1`,
      3,
      this.#k.templates(),
      this.#k.template(rec.name),
      this.#k.templatesChanged(),
      rec.name,
      String(max),
      ...fieldsOf(rec),
    );
    return ok === 1;
  }

  /** Deletes a template (and announces it); false if there was none. */
  async delete(name: string): Promise<boolean> {
    const [[, removed]] = (await this.#redis
      .multi()
      .srem(this.#k.templates(), name)
      .del(this.#k.template(name))
      .publish(this.#k.templatesChanged(), name)
      .exec()) as [[unknown, number]];
    return removed === 1;
  }

  /**
   * The build of `hash` in flight, or a new one: the lease on the hash says which. A new build is recorded with its
   * spec and its stream's first line; `enqueue` then queues it (and when it cannot, the build ends as failed).
   */
  async startBuild(
    hash: string,
    spec: TemplateImageSpec,
    enqueue: (buildId: string) => Promise<void>,
  ): Promise<{ buildId: string; created: boolean }> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const id = newBuildId();
      const took = await this.#redis.set(this.#k.buildLease(hash), id, 'PX', BUILD_QUEUED_TTL_MS, 'NX');
      if (took !== 'OK') {
        const current = await this.#redis.get(this.#k.buildLease(hash));
        if (current) return { buildId: current, created: false };
        continue;
      }
      const now = Date.now();
      await this.#redis
        .multi()
        .hset(this.#k.build(id), 'hash', hash, 'spec', JSON.stringify(spec), 'state', 'building', 'created_at', now)
        .xadd(this.#k.buildEvents(id), '*', 'type', 'log', 'data', JSON.stringify({ text: 'queued for a worker\n' }))
        .expire(this.#k.build(id), BUILD_RETENTION_S)
        .expire(this.#k.buildEvents(id), BUILD_RETENTION_S)
        .exec();
      try {
        await enqueue(id);
      } catch (err) {
        await this.finish(id, hash, { state: 'failed', error: `could not queue the build: ${(err as Error).message}` });
        throw err;
      }
      return { buildId: id, created: true };
    }
    throw new Error('could not start or find a build of this recipe');
  }

  async build(id: string): Promise<BuildRecord | null> {
    const h = await this.#redis.hgetall(this.#k.build(id));
    if (!h.spec) return null;
    return {
      id,
      hash: h.hash!,
      spec: JSON.parse(h.spec) as TemplateImageSpec,
      state: h.state as TemplateState,
      startedAt: h.started_at ? Number(h.started_at) : null,
      finishedAt: h.finished_at ? Number(h.finished_at) : null,
      error: h.error || null,
    };
  }

  /** A worker takes a build: it holds the lease (renewed with `renew`) from now on. */
  async takeBuild(id: string, hash: string, worker: string): Promise<void> {
    await this.#redis
      .multi()
      .set(this.#k.buildLease(hash), id, 'PX', BUILD_LEASE_MS * 3)
      .hset(this.#k.build(id), 'started_at', Date.now(), 'worker', worker)
      .exec();
  }

  async renew(id: string, hash: string): Promise<void> {
    await this.#redis.set(this.#k.buildLease(hash), id, 'PX', BUILD_LEASE_MS * 3, 'XX');
  }

  /**
   * Ends a build and the templates waiting on it (see FINISH); with `ifLost`, only a build whose lease is gone.
   * Answers how many templates it changed, or -1 when the build had already ended (or, with `ifLost`, is alive).
   */
  async finish(
    id: string,
    hash: string,
    end: {
      state: 'ready' | 'failed';
      image?: string;
      error?: string;
      logTail?: string;
      durationMs?: number;
      cached?: boolean;
    },
    { ifLost = false }: { ifLost?: boolean } = {},
  ): Promise<number> {
    const event: TemplateBuildResultEvent = {
      state: end.state,
      image: end.image ?? null,
      error: end.error ?? null,
      duration_ms: end.durationMs ?? 0,
      cached: end.cached ?? false,
    };
    return (await this.#redis.eval(
      FINISH,
      5,
      this.#k.templates(),
      this.#k.build(id),
      this.#k.buildLease(hash),
      this.#k.buildEvents(id),
      this.#k.templatesChanged(),
      id,
      end.state,
      end.image ?? '',
      end.error ?? '',
      end.logTail ?? '',
      Date.now(),
      this.#k.template(''),
      ifLost ? '1' : '0',
      JSON.stringify(event),
      BUILD_RETENTION_S,
    )) as number;
  }

  /**
   * Brings a template whose build has ended up to date: the end of a build it joined just as the build ended, or of
   * a build lost with its worker (its lease gone). Answers the template as it now is.
   */
  async reconcile(rec: TemplateRecord): Promise<TemplateRecord> {
    if (rec.state !== 'building' || rec.buildId === null) return rec;
    const id = rec.buildId;
    const copied = await this.#redis.eval(
      `local b = redis.call('HMGET', KEYS[2], 'state', 'image', 'error', 'log_tail', 'finished_at')
       if not b[1] or b[1] == 'building' then return 0 end
       if redis.call('HGET', KEYS[1], 'build_id') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'state') ~= 'building' then
         return 0 end
       redis.call('HSET', KEYS[1], 'state', b[1], 'error', b[3] or '', 'log_tail', b[4] or '', 'updated_at', b[5])
       if b[1] == 'ready' then redis.call('HSET', KEYS[1], 'image', b[2]) end
       return 1`,
      2,
      this.#k.template(rec.name),
      this.#k.build(id),
      id,
    );
    if (copied === 0 && (await this.#redis.exists(this.#k.buildLease(rec.hash))) === 0) {
      await this.finish(
        id,
        rec.hash,
        { state: 'failed', error: 'the build was lost: the worker building it stopped' },
        { ifLost: true },
      );
    }
    return (await this.get(rec.name)) ?? rec;
  }

  buildEventsKey(id: string): string {
    return this.#k.buildEvents(id);
  }

  /** The channel template changes are announced on (the name changed, as the message). */
  get channel(): string {
    return this.#k.templatesChanged();
  }
}

function recordOf(name: string, h: Record<string, string>): TemplateRecord {
  return {
    name,
    recipe: JSON.parse(h.recipe!) as TemplateRecipe,
    source: h.source === 'file' ? 'file' : 'api',
    hash: h.hash ?? '',
    state: (h.state ?? 'failed') as TemplateState,
    image: h.image || null,
    buildId: h.build_id || null,
    error: h.error || null,
    logTail: h.log_tail || null,
    createdAt: Number(h.created_at),
    updatedAt: Number(h.updated_at),
  };
}

function fieldsOf(r: TemplateRecord): string[] {
  return [
    'recipe',
    JSON.stringify(r.recipe),
    'source',
    r.source,
    'hash',
    r.hash,
    'state',
    r.state,
    'image',
    r.image ?? '',
    'build_id',
    r.buildId ?? '',
    'error',
    r.error ?? '',
    'log_tail',
    r.logTail ?? '',
    'created_at',
    String(r.createdAt),
    'updated_at',
    String(r.updatedAt),
  ];
}
