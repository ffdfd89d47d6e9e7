import type { Redis } from 'ioredis';

/** Lua shared by the scripts below: a new session under the tenant's limit (false when at the limit). */
const CREATE_SESSION = `
  local function createSession(key, tenantSessions, expiry, id, tenant, now, ttl, maxSessions, metadata, mode)
    if redis.call('ZCOUNT', tenantSessions, now, '+inf') >= tonumber(maxSessions) then return false end
    redis.call('HSET', key, 'tenant', tenant, 'created_at', now, 'last_used_at', now, 'ttl', ttl, 'metadata', metadata,
      'mode', mode, 'generation', 0)
    local exp = tonumber(now) + tonumber(ttl) * 1000
    redis.call('ZADD', tenantSessions, exp, id)
    redis.call('ZADD', expiry, exp, id)
    return true
  end`;

/** Lua shared by the scripts below: appends ARGV[from..] (type, data pairs) to an execution's event stream. */
const APPEND_EVENTS = `
  local function appendEvents(key, from)
    for i = from, #ARGV, 2 do redis.call('XADD', key, '*', 'type', ARGV[i], 'data', ARGV[i + 1]) end
  end`;

/**
 * Lua scripts for every state change that must be atomic: a session's busy lock, the one-way
 * transitions of an execution, and finalisation (state + result event + lock release in one step,
 * so a worker and the reaper racing to end the same run produce exactly one result).
 */
const SCRIPTS = {
  sgCreateSession: {
    numberOfKeys: 3, // session, tenantSessions, sessionExpiry
    // ARGV: sessionId, tenant, now, ttlS, maxSessions, metadata, mode
    lua: `${CREATE_SESSION}
      return createSession(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]) and 1 or 0`,
  },
  sgStartExecution: {
    // session, sessionLock, execution, tenantSessions, sessionExpiry, tenantExecutions, sessionExecutions, events
    numberOfKeys: 8,
    // ARGV: sessionId, tenant, executionId, now, meta, lockTtlMs, retentionS, queuedEvent, the channel to tell
    // when the run ends ('' for none), then for a session created on the way (a one-shot): ttlS, maxSessions.
    lua: `${CREATE_SESSION}
      if ARGV[10] and not createSession(KEYS[1], KEYS[4], KEYS[5], ARGV[1], ARGV[2], ARGV[4], ARGV[10], ARGV[11], '{}', 'process') then
        return 'max_sessions'
      end
      if redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[2] then return 'not_found' end
      local now = tonumber(ARGV[4])
      local exp = redis.call('ZSCORE', KEYS[5], ARGV[1])
      if (not exp) or tonumber(exp) < now then return 'not_found' end
      if not redis.call('SET', KEYS[2], ARGV[3], 'NX', 'PX', ARGV[6]) then return 'busy' end
      redis.call('HSET', KEYS[3], 'meta', ARGV[5], 'state', 'queued')
      if ARGV[9] ~= '' then redis.call('HSET', KEYS[3], 'notify', ARGV[9]) end
      redis.call('XADD', KEYS[8], '*', 'type', 'phase', 'data', ARGV[8])
      local newexp = now + tonumber(redis.call('HGET', KEYS[1], 'ttl')) * 1000
      redis.call('HSET', KEYS[1], 'last_used_at', ARGV[4])
      redis.call('ZADD', KEYS[4], newexp, ARGV[1])
      redis.call('ZADD', KEYS[5], newexp, ARGV[1])
      local old = now - tonumber(ARGV[7]) * 1000
      redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', old)
      redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', old)
      redis.call('ZADD', KEYS[6], now, ARGV[3])
      redis.call('ZADD', KEYS[7], now, ARGV[3])
      return 'ok'`,
  },
  sgMarkRunning: {
    numberOfKeys: 4, // execution, lease, running, cancelFlag
    // ARGV: executionId, now, workerId, leaseMs. 0: no longer queued; 1: running; 2: running, but a cancel came first.
    lua: `
      if redis.call('HGET', KEYS[1], 'state') ~= 'queued' then return 0 end
      redis.call('HSET', KEYS[1], 'state', 'running', 'started_at', ARGV[2])
      redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
      redis.call('SADD', KEYS[3], ARGV[1])
      return redis.call('EXISTS', KEYS[4]) == 1 and 2 or 1`,
  },
  sgFinalize: {
    numberOfKeys: 5, // execution, events, sessionLock, running, lease
    // ARGV: executionId, now, resultJson, state, retentionS, allowedFromCsv, doneEvent, resultEvent, then the run's
    // events not yet written, as type, data pairs. The result entry also carries started_at and finished_at (ms),
    // so whoever waits for it has the whole terminal record without reading it back; so does the notice published
    // to the channel `start` was given (id, started_at, finished_at and the result event, a line each).
    lua: `${APPEND_EVENTS}
      local cur, started, notify = unpack(redis.call('HMGET', KEYS[1], 'state', 'started_at', 'notify'))
      if not cur then return 0 end
      local allowed = false
      for s in string.gmatch(ARGV[6], '[^,]+') do if s == cur then allowed = true end end
      if not allowed then return 0 end
      started = started or ''
      redis.call('HSET', KEYS[1], 'state', ARGV[4], 'finished_at', ARGV[2], 'result', ARGV[3])
      appendEvents(KEYS[2], 9)
      redis.call('XADD', KEYS[2], '*', 'type', 'phase', 'data', ARGV[7])
      redis.call('XADD', KEYS[2], '*', 'type', 'result', 'data', ARGV[8], 'started_at', started, 'finished_at', ARGV[2])
      if notify then
        redis.call('PUBLISH', notify, ARGV[1] .. '\\n' .. started .. '\\n' .. ARGV[2] .. '\\n' .. ARGV[8])
      end
      if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
      redis.call('SREM', KEYS[4], ARGV[1])
      redis.call('DEL', KEYS[5])
      redis.call('EXPIRE', KEYS[1], ARGV[5])
      redis.call('EXPIRE', KEYS[2], ARGV[5])
      return 1`,
  },
  sgAppendEvents: {
    numberOfKeys: 1, // events
    // ARGV: type, data pairs. One command, so a reader blocked on the stream wakes once for all of them.
    lua: `${APPEND_EVENTS}
      appendEvents(KEYS[1], 1)`,
  },
  sgExpireSession: {
    numberOfKeys: 4, // session, sessionLock, tenantSessions, sessionExpiry
    // ARGV: sessionId, now, force ('1' deletes even when not yet expired)
    lua: `
      if redis.call('EXISTS', KEYS[2]) == 1 and ARGV[3] ~= '1' then return 0 end
      local exp = redis.call('ZSCORE', KEYS[4], ARGV[1])
      if ARGV[3] ~= '1' and exp and tonumber(exp) > tonumber(ARGV[2]) then return 0 end
      redis.call('DEL', KEYS[1])
      redis.call('ZREM', KEYS[3], ARGV[1])
      redis.call('ZREM', KEYS[4], ARGV[1])
      return 1`,
  },
} as const;

type ScriptName = keyof typeof SCRIPTS;
export type ScriptRedis = Redis & { [K in ScriptName]: (...args: (string | number)[]) => Promise<unknown> };

/** Registers sandgate's scripts on a connection (EVALSHA with automatic fallback to EVAL). */
export function withScripts(redis: Redis): ScriptRedis {
  for (const [name, def] of Object.entries(SCRIPTS)) {
    if (!(name in redis)) redis.defineCommand(name, { numberOfKeys: def.numberOfKeys, lua: def.lua });
  }
  return redis as ScriptRedis;
}

/**
 * Runs a script as EVAL, never EVALSHA, for a command that another is sent right behind on the same connection:
 * ioredis resends an EVALSHA that meets NOSCRIPT (after a SCRIPT FLUSH) as EVAL, which would then reach Redis
 * after the command behind it. Redis caches the script by its hash either way.
 */
export function evalInOrder(redis: Redis, name: ScriptName, ...args: (string | number)[]): Promise<unknown> {
  const { lua, numberOfKeys } = SCRIPTS[name];
  return redis.eval(lua, numberOfKeys, ...args);
}
