import type { Redis } from 'ioredis';
import { OBSERVE_LUA } from './deployment-stats.ts';
import { TIME_INDEX_LUA } from './time-index.ts';
import { VOLUME_SCRIPTS } from './volume-scripts.ts';

/**
 * Lua: a new session under the tenant's limit of live sessions (false when at the limit), or a paused one (a fork, a
 * snapshot restored into a new session: `paused`, counted nowhere until it is used). A live session is in the
 * tenant's live index and in the idle index, scored by when it pauses if left idle (its `idle` seconds from now);
 * every session is in the expiry index, scored by when it is deleted if left alone (its `ttl`, the retention).
 * `fields` are more of the record, as field, value pairs.
 */
const CREATE_SESSION = `${TIME_INDEX_LUA}
  local function createSession(key, tenantSessions, sessionList, expiry, idleIndex, id, tenant, now, ttl, maxSessions,
      metadata, mode, paused, fields)
    now = tonumber(now)
    if (not paused) and redis.call('ZCOUNT', tenantSessions, now, '+inf') >= tonumber(maxSessions) then return false end
    redis.call('HSET', key, 'tenant', tenant, 'created_at', now, 'last_used_at', now, 'ttl', ttl, 'metadata', metadata,
      'mode', mode, 'generation', 0)
    if #fields > 0 then redis.call('HSET', key, unpack(fields)) end
    redis.call('ZADD', expiry, now + tonumber(ttl) * 1000, id)
    if paused then
      redis.call('HSET', key, 'paused_at', now)
    else
      local pausesAt = now + tonumber(redis.call('HGET', key, 'idle') or '300') * 1000
      redis.call('ZADD', tenantSessions, pausesAt, id)
      redis.call('ZADD', idleIndex, pausesAt, id)
    end
    indexAdd(sessionList, now, id)
    return true
  end`;

/**
 * Lua: takes a session's lock for a session operation (not a run), when the session is the tenant's ('' for any) and
 * no run or other operation holds it. With \`live\`, a paused session (or one past its idle time) becomes live, within
 * the tenant's limit. Answers 'ok', 'not_found', 'busy' or 'max_sessions'.
 */
const LOCK_SESSION = `
  local function lockSession(key, lock, tenantSessions, idleIndex, id, tenant, owner, lockMs, now, live, maxSessions,
      holdMs)
    now = tonumber(now)
    local t = redis.call('HGET', key, 'tenant')
    if (not t) or (tenant ~= '' and t ~= tenant) then return 'not_found' end
    local live = live == '1'
    local pausesAt = redis.call('ZSCORE', tenantSessions, id)
    local asleep = redis.call('HEXISTS', key, 'paused_at') == 1 or (not pausesAt) or tonumber(pausesAt) < now
    if live and asleep and redis.call('ZCOUNT', tenantSessions, now, '+inf') >= tonumber(maxSessions) then
      return 'max_sessions'
    end
    if not redis.call('SET', lock, owner, 'NX', 'PX', lockMs) then return 'busy' end
    if live then
      redis.call('HDEL', key, 'paused_at')
      local holdUntil = now + tonumber(holdMs) + tonumber(redis.call('HGET', key, 'idle') or '300') * 1000
      redis.call('ZADD', tenantSessions, holdUntil, id)
      redis.call('ZADD', idleIndex, holdUntil, id)
    end
    return 'ok'
  end`;

/** Lua shared by the scripts below: appends ARGV[from..] (type, data pairs) to an execution's event stream. */
const APPEND_EVENTS = `
  local function appendEvents(key, from)
    for i = from, #ARGV, 2 do redis.call('XADD', key, '*', 'type', ARGV[i], 'data', ARGV[i + 1]) end
  end`;

/**
 * Lua shared by the scripts below: drops the members of a tenant's queued or running index whose execution is no
 * longer in that state (a record lost to a Redis restart without persistence), so a stale entry cannot hold a slot
 * for ever. Called only when the index is at its limit, so the common case costs nothing.
 */
const PRUNE = `
  local function prune(key, isSet, executionPrefix, state)
    local ids = isSet and redis.call('SMEMBERS', key) or redis.call('ZRANGE', key, 0, -1)
    for _, id in ipairs(ids) do
      if redis.call('HGET', executionPrefix .. id, 'state') ~= state then
        if isSet then redis.call('SREM', key, id) else redis.call('ZREM', key, id) end
      end
    end
    return isSet and redis.call('SCARD', key) or redis.call('ZCARD', key)
  end`;

/**
 * Lua scripts for every state change that must be atomic: a session's busy lock, the one-way
 * transitions of an execution, and finalisation (state + result event + lock release in one step,
 * so a worker and the reaper racing to end the same run produce exactly one result).
 */
const SCRIPTS = {
  sgCreateSession: {
    numberOfKeys: 5, // session, tenantSessions, tenantSessionList, sessionExpiry, sessionIdle
    // ARGV: sessionId, tenant, now, ttlS, maxSessions, metadata, mode, paused ('1': made paused), then more fields of
    // the record as field, value pairs (its idle seconds, undo mode, the session it was forked from, …)
    lua: `${CREATE_SESSION}
      return createSession(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5],
        ARGV[6], ARGV[7], ARGV[8] == '1', { unpack(ARGV, 9) }) and 1 or 0`,
  },
  sgLockSession: {
    numberOfKeys: 4, // session, sessionLock, tenantSessions, sessionIdle
    // ARGV: sessionId, tenant ('' any), owner (the operation's id), lockMs, now, live ('1': make it live), maxSessions,
    // holdMs (how long the operation may hold it: it does not pause meanwhile)
    lua: `${LOCK_SESSION}
      return lockSession(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6],
        ARGV[7], ARGV[8])`,
  },
  sgUnlockSession: {
    numberOfKeys: 7, // session, sessionLock, tenantSessions, sessionIdle, sessionExpiry, snapshots, tenantStorage
    // ARGV: sessionId, owner, now, outcome ('live': idle from now; 'paused': paused now; 'keep': as it is), touch
    // ('1': used now: its retention starts again)
    // Lets the lock go if \`owner\` holds it, leaving the session live (idle from now) or paused.
    lua: `
      local now = tonumber(ARGV[3])
      if redis.call('GET', KEYS[2]) == ARGV[2] then redis.call('DEL', KEYS[2]) end
      if redis.call('HEXISTS', KEYS[1], 'tenant') == 0 then return 0 end
      if ARGV[4] == 'paused' then
        redis.call('HSET', KEYS[1], 'paused_at', now)
        redis.call('ZREM', KEYS[3], ARGV[1])
        redis.call('ZREM', KEYS[4], ARGV[1])
      elseif ARGV[4] == 'live' then
        local pausesAt = now + tonumber(redis.call('HGET', KEYS[1], 'idle') or '300') * 1000
        redis.call('ZADD', KEYS[3], pausesAt, ARGV[1])
        redis.call('ZADD', KEYS[4], pausesAt, ARGV[1])
      end
      if ARGV[5] == '1' then
        redis.call('HSET', KEYS[1], 'last_used_at', now)
        redis.call('ZADD', KEYS[5], now + tonumber(redis.call('HGET', KEYS[1], 'ttl')) * 1000, ARGV[1])
      end
      return 1`,
  },
  sgIdleFrom: {
    numberOfKeys: 3, // session, tenantSessions, sessionIdle
    // ARGV: sessionId, now. A run ended: a live session pauses \`idle\` seconds from now if left alone.
    lua: `
      if redis.call('HEXISTS', KEYS[1], 'paused_at') == 1 or redis.call('HEXISTS', KEYS[1], 'tenant') == 0 then
        return 0
      end
      local pausesAt = tonumber(ARGV[2]) + tonumber(redis.call('HGET', KEYS[1], 'idle') or '300') * 1000
      redis.call('ZADD', KEYS[2], 'XX', pausesAt, ARGV[1])
      redis.call('ZADD', KEYS[3], 'XX', pausesAt, ARGV[1])
      return 1`,
  },
  sgStartExecution: {
    // session, sessionLock, execution, tenantSessions, sessionExpiry, tenantExecutions, sessionExecutions, events,
    // tenantSessionList, queued, tenantQueued, tenantRunning, sessionIdle, tenantStorage
    numberOfKeys: 14,
    // ARGV: sessionId, tenant, executionId, now, meta, lockTtlMs, retentionS, queuedEvent, the channel to tell when the
    // run ends ('' for none), spec (the run's ExecutionJob, kept until it ends), maxInFlight (0: no limit),
    // maxSessions, oneshot ('1': create the session, as a one-shot's), the session TTL (s), executionPrefix, the run's
    // timeout (ms: the session does not pause while it may run), the tenant's storage quota in bytes (0: none).
    // Answers the run's rank in its tenant's queue, or why it was refused ('storage <bytes used>' over the quota).
    lua: `${TIME_INDEX_LUA}${PRUNE}
      local storageLimit = tonumber(ARGV[17])
      if storageLimit > 0 then
        local used = 0
        for _, v in ipairs(redis.call('HVALS', KEYS[14])) do used = used + (tonumber(v) or 0) end
        -- Over the quota, nothing runs (runs write files); at it, runs still run: the bytes a paused session holds are
        -- counted already, and resuming it (or reading what it has) costs none more.
        if used > storageLimit then return 'storage ' .. string.format('%.0f', used) end
      end
      local now = tonumber(ARGV[4])
      local maxInFlight = tonumber(ARGV[11])
      if maxInFlight > 0 and redis.call('ZCARD', KEYS[11]) + redis.call('SCARD', KEYS[12]) >= maxInFlight
        and prune(KEYS[11], false, ARGV[15], 'queued') + prune(KEYS[12], true, ARGV[15], 'running') >= maxInFlight then
        return 'quota'
      end
      local oneshot = ARGV[13] == '1'
      if oneshot then
        -- A one-shot's session is no live session: it holds the run's files for the retention, and counts nowhere.
        redis.call('HSET', KEYS[1], 'tenant', ARGV[2], 'created_at', now, 'last_used_at', now, 'ttl', ARGV[14],
          'metadata', '{}', 'mode', 'process', 'generation', 0, 'oneshot', 1)
        redis.call('ZADD', KEYS[5], now + tonumber(ARGV[7]) * 1000, ARGV[1])
      else
        if redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[2] then return 'not_found' end
        local exp = redis.call('ZSCORE', KEYS[5], ARGV[1])
        if (not exp) or tonumber(exp) < now then return 'not_found' end
        if redis.call('HGET', KEYS[1], 'oneshot') and redis.call('EXISTS', KEYS[2]) == 0 then
          -- Running again in a one-shot's session makes it a live session, within the tenant's limit.
          if redis.call('ZCOUNT', KEYS[4], now, '+inf') >= tonumber(ARGV[12]) then return 'max_sessions' end
          redis.call('HDEL', KEYS[1], 'oneshot')
          indexAdd(KEYS[9], redis.call('HGET', KEYS[1], 'created_at'), ARGV[1])
        elseif redis.call('EXISTS', KEYS[2]) == 0 then
          -- A paused session (or one past its idle time, as good as paused) is live again, within the tenant's limit.
          local pausesAt = redis.call('ZSCORE', KEYS[4], ARGV[1])
          if (redis.call('HEXISTS', KEYS[1], 'paused_at') == 1 or (not pausesAt) or tonumber(pausesAt) < now)
            and redis.call('ZCOUNT', KEYS[4], now, '+inf') >= tonumber(ARGV[12]) then
            return 'max_sessions'
          end
        end
      end
      if not redis.call('SET', KEYS[2], ARGV[3], 'NX', 'PX', ARGV[6]) then return 'busy' end
      local top = redis.call('ZREVRANGE', KEYS[11], 0, 0, 'WITHSCORES')
      local rank = top[2] and tonumber(top[2]) + 1 or 1
      redis.call('ZADD', KEYS[11], rank, ARGV[3])
      redis.call('ZADD', KEYS[10], now, ARGV[3])
      redis.call('HSET', KEYS[3], 'meta', ARGV[5], 'state', 'queued', 'spec', ARGV[10])
      if ARGV[9] ~= '' then redis.call('HSET', KEYS[3], 'notify', ARGV[9]) end
      redis.call('XADD', KEYS[8], '*', 'type', 'phase', 'data', ARGV[8])
      if not oneshot then
        local newexp = now + tonumber(redis.call('HGET', KEYS[1], 'ttl')) * 1000
        local pausesAt = now + tonumber(ARGV[16]) + tonumber(redis.call('HGET', KEYS[1], 'idle') or '300') * 1000
        redis.call('HSET', KEYS[1], 'last_used_at', ARGV[4])
        redis.call('HDEL', KEYS[1], 'paused_at')
        redis.call('ZADD', KEYS[4], pausesAt, ARGV[1])
        redis.call('ZADD', KEYS[13], pausesAt, ARGV[1])
        redis.call('ZADD', KEYS[5], newexp, ARGV[1])
      end
      local retention = tonumber(ARGV[7])
      for _, index in ipairs({ KEYS[6], KEYS[7] }) do
        indexTrim(index, now - retention * 1000)
        indexAdd(index, now, ARGV[3])
        redis.call('EXPIRE', index, retention)
      end
      return rank`,
  },
  sgMarkRunning: {
    numberOfKeys: 8, // execution, lease, running, cancelFlag, queued, tenantQueued, tenantRunning, queueWaitHistogram
    // ARGV: executionId, now, workerId, leaseMs, maxRunning (0: no limit), executionPrefix, then the run's wait in the
    // queue as an observation of the histogram (series, le, seconds; le '' for none), recorded once it runs.
    // { 0 }: no longer queued; { 3 }: the tenant runs its maximum already, so it waits; { 1, spec }: running;
    // { 2, spec }: running, but a cancel came first.
    lua: `${PRUNE}${OBSERVE_LUA}
      if redis.call('HGET', KEYS[1], 'state') ~= 'queued' then return { 0 } end
      local maxRunning = tonumber(ARGV[5])
      if maxRunning > 0 and redis.call('SCARD', KEYS[7]) >= maxRunning
        and prune(KEYS[7], true, ARGV[6], 'running') >= maxRunning then
        return { 3 }
      end
      redis.call('HSET', KEYS[1], 'state', 'running', 'started_at', ARGV[2])
      redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
      redis.call('SADD', KEYS[3], ARGV[1])
      redis.call('ZREM', KEYS[5], ARGV[1])
      redis.call('ZREM', KEYS[6], ARGV[1])
      redis.call('SADD', KEYS[7], ARGV[1])
      if ARGV[8] ~= '' then observe(KEYS[8], ARGV[7], ARGV[8], ARGV[9]) end
      return { redis.call('EXISTS', KEYS[4]) == 1 and 2 or 1, redis.call('HGET', KEYS[1], 'spec') }`,
  },
  sgFinalize: {
    // execution, events, sessionLock, running, lease, queued, tenantQueued, tenantRunning, webhooksDue, statsCounters,
    // durationHistogram, tenantStorage
    numberOfKeys: 12,
    // ARGV: executionId, now, resultJson, state, retentionS, allowedFromCsv, doneEvent, resultEvent, the counter field
    // the ending counts in, its duration as an observation (series, le, seconds), the session and the bytes its files
    // take now (session '' for no new measure), then the run's events not yet written, as type, data pairs.
    // The result entry also carries started_at and finished_at (ms), so whoever waits for it has the whole terminal
    // record without reading it back; so does the notice published to the channel `start` was given (id, started_at,
    // finished_at and the result event, a line each).
    // The run's spec goes: its code, env (secrets, maybe) and stdin are kept no longer than the run. The storage
    // measure is recorded whoever ends the run; the ending is counted (/metrics) by the one that ends it, in this step.
    lua: `${APPEND_EVENTS}${OBSERVE_LUA}
      if ARGV[13] ~= '' then redis.call('HSET', KEYS[12], ARGV[13], ARGV[14]) end
      local cur, started, notify = unpack(redis.call('HMGET', KEYS[1], 'state', 'started_at', 'notify'))
      if not cur then return 0 end
      local allowed = false
      for s in string.gmatch(ARGV[6], '[^,]+') do if s == cur then allowed = true end end
      if not allowed then return 0 end
      started = started or ''
      redis.call('HSET', KEYS[1], 'state', ARGV[4], 'finished_at', ARGV[2], 'result', ARGV[3])
      redis.call('HDEL', KEYS[1], 'spec', 'notify')
      appendEvents(KEYS[2], 15)
      redis.call('XADD', KEYS[2], '*', 'type', 'phase', 'data', ARGV[7])
      redis.call('XADD', KEYS[2], '*', 'type', 'result', 'data', ARGV[8], 'started_at', started, 'finished_at', ARGV[2])
      if notify then
        redis.call('PUBLISH', notify, ARGV[1] .. '\\n' .. started .. '\\n' .. ARGV[2] .. '\\n' .. ARGV[8])
      end
      if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
      redis.call('SREM', KEYS[4], ARGV[1])
      redis.call('DEL', KEYS[5])
      redis.call('ZREM', KEYS[6], ARGV[1])
      redis.call('ZREM', KEYS[7], ARGV[1])
      redis.call('SREM', KEYS[8], ARGV[1])
      -- A run with a callback_url is due for delivery in the same step as its end: no ending can lose its webhook.
      if redis.call('HEXISTS', KEYS[1], 'callback') == 1 then redis.call('ZADD', KEYS[9], ARGV[2], ARGV[1]) end
      redis.call('EXPIRE', KEYS[1], ARGV[5])
      redis.call('EXPIRE', KEYS[2], ARGV[5])
      redis.call('HINCRBY', KEYS[10], ARGV[9], 1)
      observe(KEYS[11], ARGV[10], ARGV[11], ARGV[12])
      return 1`,
  },
  sgAppendEvents: {
    numberOfKeys: 1, // events
    // ARGV: type, data pairs. One command, so a reader blocked on the stream wakes once for all of them.
    lua: `${APPEND_EVENTS}
      appendEvents(KEYS[1], 1)`,
  },
  sgExpireSession: {
    numberOfKeys: 7, // session, sessionLock, tenantSessions, sessionExpiry, tenantSessionList, sessionIdle, snapshots
    // ARGV: sessionId, now, force ('1' deletes even when not yet expired)
    lua: `${TIME_INDEX_LUA}
      if redis.call('EXISTS', KEYS[2]) == 1 and ARGV[3] ~= '1' then return 0 end
      local exp = redis.call('ZSCORE', KEYS[4], ARGV[1])
      if ARGV[3] ~= '1' and exp and tonumber(exp) > tonumber(ARGV[2]) then return 0 end
      local created = redis.call('HGET', KEYS[1], 'created_at')
      if created then redis.call('ZREM', KEYS[5], indexMember(created, ARGV[1])) end
      redis.call('DEL', KEYS[1], KEYS[7])
      redis.call('ZREM', KEYS[3], ARGV[1])
      redis.call('ZREM', KEYS[4], ARGV[1])
      redis.call('ZREM', KEYS[6], ARGV[1])
      return 1`,
  },
} as const;

type ScriptName = keyof typeof SCRIPTS | keyof typeof VOLUME_SCRIPTS;
export type LuaRedis = Redis & { [K in ScriptName]: (...args: (string | number)[]) => Promise<unknown> };

/** Registers sandgate's scripts on a connection (EVALSHA with automatic fallback to EVAL). */
export function withLuaScripts(redis: Redis): LuaRedis {
  for (const [name, def] of Object.entries({ ...SCRIPTS, ...VOLUME_SCRIPTS })) {
    if (!(name in redis)) redis.defineCommand(name, { numberOfKeys: def.numberOfKeys, lua: def.lua });
  }
  return redis as LuaRedis;
}
