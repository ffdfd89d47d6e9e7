import type { Redis } from 'ioredis';
import {
  SandgateError,
  type JobVolume,
  type SessionMode,
  type Snapshot,
  type TemplateLimits,
  type UndoMode,
} from '@sandgate/contracts';
import type { Keys } from './keys.ts';
import { randomHex } from './random-ids.ts';
import type { LuaRedis } from './lua-scripts.ts';
import { pageIndex, type Page } from './time-index.ts';

/** A service of a session, as the gateway started it (POST /v1/sessions/:id/services); its live state: the agent's. */
export interface ServiceRecord {
  name: string;
  command: string;
  /** The port the proxy forwards to, when the start named one. */
  port: number | null;
  /** The execution that starts it. */
  executionId: string;
  createdAt: number;
}

const SERVICE_FIELD = 'service:';
/** How many times the preview links of a service (by name) were revoked: they are signed over it (ServiceManager). */
const REVOKED_FIELD = 'service-previews-revoked:';

/** What a session's preview links are signed over and checked against (SessionStore.previewState). */
export interface PreviewState {
  tenant: string;
  services: ServiceRecord[];
  /** Service name → how many times its preview links were revoked (0: never). */
  revocations: Record<string, number>;
}

export interface SessionRecord {
  id: string;
  tenant: string;
  mode: SessionMode;
  /** Bumped by a restart: the session's sandbox of an older generation is replaced on next use. */
  generation: number;
  createdAt: number;
  lastUsedAt: number;
  expiresAt: number;
  ttlSeconds: number;
  metadata: Record<string, string>;
  /** The execution holding the session's lock, if any. */
  currentExecutionId: string | null;
  /**
   * A one-shot's session: it holds that run's files for the retention and counts as no live session, until an
   * execution runs in it again (then it is a session like any other).
   */
  oneshot: boolean;
  /** It holds private data: its sandbox has no network for the rest of its life (the ratchet never reverses). */
  private: boolean;
  /** When it was paused (ms); null when it is not. */
  pausedAt: number | null;
  /** When it pauses if left idle (ms); null while paused (or a one-shot's). */
  pausesAt: number | null;
  /** Idle seconds after which it pauses by itself. */
  idleSeconds: number;
  undo: UndoMode;
  /** The session it was copied from (a fork, a snapshot restored into a new session). */
  forkedFrom: string | null;
  /** The template its sandbox is made from, as resolved when it was made; null: the runtime image. */
  template: SessionTemplate | null;
  /** The volumes it mounts, resolved when it was made (VolumeStore.claim). */
  volumes: JobVolume[];
}

/** What a new session is made with besides its tenant. */
export interface NewSession {
  /** Its retention: kept this long unused, then deleted. */
  ttlSeconds: number;
  maxSessions: number;
  mode?: SessionMode;
  metadata?: Record<string, string>;
  /** Idle seconds after which it pauses by itself; default 300 (the caller passes SANDGATE_SESSION_IDLE_PAUSE_S). */
  idleSeconds?: number;
  undo?: UndoMode;
  /** Made paused (a fork, a snapshot restored into a new session): it counts as no live session until used. */
  paused?: boolean;
  forkedFrom?: string;
  template?: SessionTemplate;
}

/** A session's template as it was when the session was made: its runs use this image, env and limits. */
export interface SessionTemplate {
  name: string;
  image: string;
  env: Record<string, string>;
  limits: TemplateLimits;
}

export const newSessionId = () => `sess_${randomHex(6)}`;
/** The id of a session operation (pause, fork …): what its session's lock holds while it goes on. */
export const newOpId = () => `op_${randomHex(8)}`;
/**
 * The id of an operation the platform does by itself (an idle pause): a run or an operation a user asks for meanwhile
 * waits for it to end (SessionStore.waitOutAutoOp) instead of being refused, since the user did nothing to conflict.
 */
export const newAutoOpId = () => `${AUTO_OP_PREFIX}${randomHex(8)}`;
const AUTO_OP_PREFIX = 'op_auto_';
/** How often a request waiting out an automatic operation looks whether it has ended. */
const AUTO_OP_POLL_MS = 100;
/** How long a session operation may hold its session's lock: saving 1 GiB of variables takes a while. */
export const SESSION_OP_LOCK_MS = 5 * 60_000;

/**
 * A tenant at its limit of live sessions, whether creating one or starting a one-shot (which creates one). Retry-After
 * is the time until the soonest of its sessions expires, if none is used before: the earliest a retry can find room.
 */
export async function maxSessionsError(redis: Redis, k: Keys, tenant: string, max: number): Promise<SandgateError> {
  const now = Date.now();
  const [, soonest] = await redis.zrangebyscore(k.tenantSessions(tenant), now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1);
  const retryAfter = Math.max(1, Math.ceil(((soonest === undefined ? now : Number(soonest)) - now) / 1000));
  return new SandgateError(
    'max_sessions',
    `tenant already has ${max} live sessions; pause or delete one, or wait for one to pause by itself (the next in ` +
      `${retryAfter} s)`,
    { extra: { retry_after: retryAfter } },
  );
}

/** Session records, their per-tenant index and their busy lock, in Redis. */
export class SessionStore {
  readonly #redis: LuaRedis;
  readonly #k: Keys;
  constructor(redis: LuaRedis, k: Keys) {
    this.#redis = redis;
    this.#k = k;
  }

  /** Creates a session, enforcing the tenant's limit of live sessions atomically (a paused one counts in none). */
  async create(tenant: string, opts: NewSession) {
    const id = newSessionId();
    const now = Date.now();
    const ok = await this.#redis.sgCreateSession(
      this.#k.session(id),
      this.#k.tenantSessions(tenant),
      this.#k.tenantSessionList(tenant),
      this.#k.sessionExpiry(),
      this.#k.sessionIdle(),
      id,
      tenant,
      now,
      opts.ttlSeconds,
      opts.maxSessions,
      JSON.stringify(opts.metadata ?? {}),
      opts.mode ?? 'process',
      opts.paused === true ? '1' : '0',
      'idle',
      opts.idleSeconds ?? 300,
      'undo',
      opts.undo ?? 'files',
      ...(opts.forkedFrom === undefined ? [] : ['forked_from', opts.forkedFrom]),
      ...(opts.template ? templateFields(opts.template) : []),
    );
    if (ok !== 1) throw await maxSessionsError(this.#redis, this.#k, tenant, opts.maxSessions);
    return (await this.get(tenant, id))!;
  }

  /** The tenant a session belongs to, for a request that carries no API key (a signed link); null if it is gone. */
  async ownerOf(id: string): Promise<string | null> {
    return this.#redis.hget(this.#k.session(id), 'tenant');
  }

  /** The session if it exists, is live and belongs to `tenant`; null otherwise (never tells tenants apart). */
  async get(tenant: string, id: string): Promise<SessionRecord | null> {
    const [[, h], [, score], [, lock], [, pausesAt]] = (await this.#redis
      .multi()
      .hgetall(this.#k.session(id))
      .zscore(this.#k.sessionExpiry(), id)
      .get(this.#k.sessionLock(id))
      .zscore(this.#k.sessionIdle(), id)
      .exec()) as [
      [unknown, Record<string, string>],
      [unknown, string | null],
      [unknown, string | null],
      [unknown, string | null],
    ];
    if (!h.tenant || h.tenant !== tenant || score === null) return null;
    const expiresAt = Number(score);
    if (expiresAt < Date.now() && lock === null) return null;
    return {
      id,
      tenant,
      expiresAt,
      mode: (h.mode ?? 'process') as SessionMode,
      generation: Number(h.generation ?? 0),
      createdAt: Number(h.created_at),
      lastUsedAt: Number(h.last_used_at),
      ttlSeconds: Number(h.ttl),
      metadata: JSON.parse(h.metadata ?? '{}') as Record<string, string>,
      currentExecutionId: lock,
      oneshot: h.oneshot === '1',
      private: h.private === '1',
      pausedAt: h.paused_at === undefined ? null : Number(h.paused_at),
      pausesAt: h.paused_at !== undefined || pausesAt === null ? null : Number(pausesAt),
      idleSeconds: Number(h.idle ?? 300),
      undo: (h.undo ?? 'files') as UndoMode,
      forkedFrom: h.forked_from ?? null,
      template: h.template
        ? {
            name: h.template,
            image: h.image ?? '',
            env: JSON.parse(h.template_env ?? '{}') as Record<string, string>,
            limits: JSON.parse(h.template_limits ?? '{}') as TemplateLimits,
          }
        : null,
      volumes: h.volumes ? (JSON.parse(h.volumes) as JobVolume[]) : [],
    };
  }

  async require(tenant: string, id: string): Promise<SessionRecord> {
    const s = await this.get(tenant, id);
    if (!s) throw new SandgateError('session_not_found', `session ${id} does not exist or has expired`);
    return s;
  }

  /**
   * Pushes the retention forward, and a live session's pause time (called on every use: uploads, downloads,
   * executions). A one-shot's session keeps its expiry, the end of the retention: it is not live, so there is no idle
   * time to push. A paused session stays paused (a file use needs no sandbox).
   */
  async touch(s: SessionRecord): Promise<void> {
    if (s.oneshot) return;
    const now = Date.now();
    const m = this.#redis
      .multi()
      .hset(this.#k.session(s.id), 'last_used_at', now)
      .zadd(this.#k.sessionExpiry(), now + s.ttlSeconds * 1000, s.id);
    if (s.pausedAt === null) {
      m.zadd(this.#k.tenantSessions(s.tenant), 'XX', now + s.idleSeconds * 1000, s.id);
      m.zadd(this.#k.sessionIdle(), 'XX', now + s.idleSeconds * 1000, s.id);
    }
    await m.exec();
  }

  /** Starts the session's sandbox afresh on its next execution (a stateful interpreter loses its state). */
  async restart(s: SessionRecord): Promise<SessionRecord> {
    const generation = await this.#redis.hincrby(this.#k.session(s.id), 'generation', 1);
    return { ...s, generation };
  }

  /**
   * Marks the session as holding private data, for good, and announces it: the egress proxy of whatever worker
   * serves it refuses its connections from then on and cuts those open; its next run gets a sandbox without network.
   */
  async markPrivate(s: SessionRecord): Promise<SessionRecord> {
    await this.#redis
      .multi()
      .hset(this.#k.session(s.id), 'private', '1')
      .publish(this.#k.privateChannel(), s.id)
      .exec();
    return { ...s, private: true };
  }

  /** Records a service of the session (in the session's hash, so it goes with it); false if the session is gone. */
  async putService(sessionId: string, rec: ServiceRecord): Promise<boolean> {
    const set = await this.#redis.eval(
      "if redis.call('hexists', KEYS[1], 'tenant') == 0 then return 0 end redis.call('hset', KEYS[1], ARGV[1], ARGV[2]) return 1",
      1,
      this.#k.session(sessionId),
      `${SERVICE_FIELD}${rec.name}`,
      JSON.stringify(rec),
    );
    return set === 1;
  }

  /** The session's services, by name. */
  async services(sessionId: string): Promise<ServiceRecord[]> {
    const h = await this.#redis.hgetall(this.#k.session(sessionId));
    return Object.entries(h)
      .filter(([field]) => field.startsWith(SERVICE_FIELD))
      .map(([, json]) => JSON.parse(json) as ServiceRecord)
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  async removeService(sessionId: string, name: string): Promise<void> {
    await this.#redis.hdel(this.#k.session(sessionId), `${SERVICE_FIELD}${name}`, `${REVOKED_FIELD}${name}`);
  }

  /** The session's tenant, services and their revocations, in one read; null when the session is gone. */
  async previewState(sessionId: string): Promise<PreviewState | null> {
    const h = await this.#redis.hgetall(this.#k.session(sessionId));
    if (!h.tenant) return null;
    const state: PreviewState = { tenant: h.tenant, services: [], revocations: {} };
    for (const [field, value] of Object.entries(h)) {
      if (field.startsWith(SERVICE_FIELD)) state.services.push(JSON.parse(value) as ServiceRecord);
      else if (field.startsWith(REVOKED_FIELD)) state.revocations[field.slice(REVOKED_FIELD.length)] = Number(value);
    }
    return state;
  }

  /** Counts one more revocation of the service's preview links; false if the service (or the session) is gone. */
  async revokePreviews(sessionId: string, name: string): Promise<boolean> {
    const done = await this.#redis.eval(
      "if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return 0 end redis.call('hincrby', KEYS[1], ARGV[2], 1) return 1",
      1,
      this.#k.session(sessionId),
      `${SERVICE_FIELD}${name}`,
      `${REVOKED_FIELD}${name}`,
    );
    return done === 1;
  }

  /** Whether the session holds private data; a session that is gone counts as private (it gets no network either). */
  async isPrivate(id: string): Promise<boolean> {
    const [tenant, flag] = await this.#redis.hmget(this.#k.session(id), 'tenant', 'private');
    return tenant === null || flag === '1';
  }

  /**
   * Ids of every session that may have a sandbox, across tenants: those not paused (a paused session's sandbox, or
   * a deleted one's, is left over and goes).
   */
  async liveIds(): Promise<Set<string>> {
    return new Set(await this.#redis.zrange(this.#k.sessionIdle(), '0', '-1'));
  }

  /** Live sessions idle past their pause time, oldest first: housekeeping pauses them. */
  async idleDue(limit = 50): Promise<string[]> {
    return this.#redis.zrangebyscore(this.#k.sessionIdle(), '-inf', Date.now(), 'LIMIT', 0, limit);
  }

  /**
   * Takes the session's lock for an operation `owner` (not a run); `live` also makes a paused session live again,
   * within `maxSessions`. `tenant` null: any tenant's (housekeeping). Throws session_not_found, session_busy or
   * max_sessions.
   */
  async lock(
    tenant: string | null,
    id: string,
    owner: string,
    {
      lockMs,
      live = false,
      maxSessions = 0,
      holdMs = lockMs,
    }: { lockMs: number; live?: boolean; maxSessions?: number; holdMs?: number },
  ): Promise<void> {
    const r = await this.#redis.sgLockSession(
      this.#k.session(id),
      this.#k.sessionLock(id),
      this.#k.tenantSessions(tenant ?? (await this.ownerOf(id)) ?? ''),
      this.#k.sessionIdle(),
      id,
      tenant ?? '',
      owner,
      lockMs,
      Date.now(),
      live ? '1' : '0',
      maxSessions,
      holdMs,
    );
    if (r === 'ok') return;
    if (r === 'not_found') throw new SandgateError('session_not_found', `session ${id} does not exist or has expired`);
    if (r === 'max_sessions') throw await maxSessionsError(this.#redis, this.#k, tenant!, maxSessions);
    const holder = await this.#redis.get(this.#k.sessionLock(id));
    throw new SandgateError(
      'session_busy',
      `session ${id} is ${holder?.startsWith('op_') ? 'being paused, resumed, forked or snapshotted' : `running ${holder}`}; ` +
        'wait for it (or cancel the run) first',
    );
  }

  /**
   * When the session's lock is held by an operation the platform does by itself (an idle pause), waits until it lets
   * go, or until `deadline`: answers true when it has (the caller tries again, and finds the session as the operation
   * left it), false when something else holds it, nothing does, or the deadline came first.
   */
  async waitOutAutoOp(id: string, deadline: number): Promise<boolean> {
    const key = this.#k.sessionLock(id);
    const holder = await this.#redis.get(key);
    if (holder === null || !holder.startsWith(AUTO_OP_PREFIX)) return false;
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, AUTO_OP_POLL_MS));
      if ((await this.#redis.get(key)) !== holder) return true;
    }
    return false;
  }

  /**
   * Lets an operation's lock go, leaving the session `live` (idle from now), `paused`, or as it was (`keep`);
   * `touch`: it was used now (its retention starts again).
   */
  async unlock(
    s: Pick<SessionRecord, 'id' | 'tenant'>,
    owner: string,
    outcome: 'live' | 'paused' | 'keep',
    touch: boolean,
  ): Promise<void> {
    await this.#redis.sgUnlockSession(
      this.#k.session(s.id),
      this.#k.sessionLock(s.id),
      this.#k.tenantSessions(s.tenant),
      this.#k.sessionIdle(),
      this.#k.sessionExpiry(),
      this.#k.sessionSnapshots(s.id),
      this.#k.tenantStorage(s.tenant),
      s.id,
      owner,
      Date.now(),
      outcome,
      touch ? '1' : '0',
    );
  }

  /** A run of a live session ended: it pauses its idle seconds from now if left alone. */
  async idleFrom(s: Pick<SessionRecord, 'id' | 'tenant'>, now = Date.now()): Promise<void> {
    await this.#redis.sgIdleFrom(
      this.#k.session(s.id),
      this.#k.tenantSessions(s.tenant),
      this.#k.sessionIdle(),
      s.id,
      now,
    );
  }

  /** The session's snapshots, oldest first. */
  async snapshots(id: string): Promise<Snapshot[]> {
    const h = await this.#redis.hgetall(this.#k.sessionSnapshots(id));
    return Object.entries(h)
      .map(([name, json]) => ({ name, ...(JSON.parse(json) as Omit<Snapshot, 'name'>) }))
      .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.name.localeCompare(b.name));
  }

  async putSnapshot(id: string, snap: Snapshot): Promise<void> {
    const { name, ...rest } = snap;
    await this.#redis.hset(this.#k.sessionSnapshots(id), name, JSON.stringify(rest));
  }

  async removeSnapshot(id: string, name: string): Promise<boolean> {
    return (await this.#redis.hdel(this.#k.sessionSnapshots(id), name)) === 1;
  }

  /** A page of the tenant's live sessions, newest first, starting after `after` (a position a previous page gave). */
  async page(tenant: string, after: string | null, limit: number): Promise<Page<SessionRecord>> {
    const load = (ids: string[]) => Promise.all(ids.map((id) => this.get(tenant, id)));
    return pageIndex(this.#redis, this.#k.tenantSessionList(tenant), after, limit, load);
  }

  /** Deletes the record; `force` deletes it even while an execution holds the lock. Returns whether it was deleted. */
  async delete(s: Pick<SessionRecord, 'id' | 'tenant'>, force: boolean): Promise<boolean> {
    const r = await this.#redis.sgExpireSession(
      this.#k.session(s.id),
      this.#k.sessionLock(s.id),
      this.#k.tenantSessions(s.tenant),
      this.#k.sessionExpiry(),
      this.#k.tenantSessionList(s.tenant),
      this.#k.sessionIdle(),
      this.#k.sessionSnapshots(s.id),
      s.id,
      Date.now(),
      force ? '1' : '0',
    );
    // Its file events go with it (they would expire anyway, SANDGATE_FILE_EVENTS_TTL_S after the latest).
    if (r === 1) await this.#redis.del(this.#k.fileEvents(s.id));
    return r === 1;
  }

  /** Sessions whose idle TTL has passed, oldest first: the janitor deletes them and their files. */
  async expired(limit = 100): Promise<{ id: string; tenant: string | null }[]> {
    const ids = await this.#redis.zrangebyscore(this.#k.sessionExpiry(), '-inf', Date.now(), 'LIMIT', 0, limit);
    const tenants = await Promise.all(ids.map((id) => this.#redis.hget(this.#k.session(id), 'tenant')));
    return ids.map((id, i) => ({ id, tenant: tenants[i] ?? null }));
  }

  /** Records the template of a session made without one on the record (a one-shot's, made as its run starts). */
  async setTemplate(id: string, t: SessionTemplate): Promise<void> {
    await this.#redis.hset(this.#k.session(id), ...templateFields(t));
  }

  /** The templates of live sessions (process and stateful, not one-shots'), each with one session using it. */
  async templatesInUse(): Promise<Map<string, string>> {
    const ids = await this.#redis.zrangebyscore(this.#k.sessionExpiry(), Date.now(), '+inf');
    const m = this.#redis.multi();
    for (const id of ids) m.hmget(this.#k.session(id), 'template', 'oneshot');
    const rows = ((await m.exec()) ?? []) as [unknown, [string | null, string | null]][];
    const used = new Map<string, string>();
    rows.forEach(([, [template, oneshot]], i) => {
      if (template && oneshot !== '1' && !used.has(template)) used.set(template, ids[i]!);
    });
    return used;
  }

  /** Removes index entries whose record is already gone. */
  async forget(id: string): Promise<void> {
    await this.#redis.multi().zrem(this.#k.sessionExpiry(), id).zrem(this.#k.sessionIdle(), id).exec();
  }
}

/** A template's fields on a session's record. */
function templateFields(t: SessionTemplate): string[] {
  return [
    'template',
    t.name,
    'image',
    t.image,
    'template_env',
    JSON.stringify(t.env),
    'template_limits',
    JSON.stringify(t.limits),
  ];
}
