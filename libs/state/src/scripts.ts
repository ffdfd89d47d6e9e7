import type { Redis } from 'ioredis';

/**
 * Lua scripts for every state change that must be atomic: a session's busy lock, the one-way
 * transitions of an execution, and finalisation (state + result event + lock release in one step,
 * so a worker and the reaper racing to end the same run produce exactly one result).
 */
const SCRIPTS = {
  sgCreateSession: {
    numberOfKeys: 3, // session, tenantSessions, sessionExpiry
    lua: `
      if redis.call('ZCOUNT', KEYS[2], ARGV[3], '+inf') >= tonumber(ARGV[5]) then return 0 end
      redis.call('HSET', KEYS[1], 'tenant', ARGV[2], 'created_at', ARGV[3], 'last_used_at', ARGV[3], 'ttl', ARGV[4], 'metadata', ARGV[6],
        'mode', ARGV[7], 'generation', 0)
      local exp = tonumber(ARGV[3]) + tonumber(ARGV[4]) * 1000
      redis.call('ZADD', KEYS[2], exp, ARGV[1])
      redis.call('ZADD', KEYS[3], exp, ARGV[1])
      return 1`,
  },
  sgStartExecution: {
    // session, sessionLock, execution, tenantSessions, sessionExpiry, tenantExecutions, sessionExecutions, events
    numberOfKeys: 8,
    // ARGV: sessionId, tenant, executionId, now, meta, lockTtlMs, retentionS, queuedEvent
    lua: `
      if redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[2] then return 'not_found' end
      local now = tonumber(ARGV[4])
      local exp = redis.call('ZSCORE', KEYS[5], ARGV[1])
      if (not exp) or tonumber(exp) < now then return 'not_found' end
      if not redis.call('SET', KEYS[2], ARGV[3], 'NX', 'PX', ARGV[6]) then return 'busy' end
      redis.call('HSET', KEYS[3], 'meta', ARGV[5], 'state', 'queued')
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
    numberOfKeys: 3, // execution, lease, running
    // ARGV: executionId, now, workerId, leaseMs
    lua: `
      if redis.call('HGET', KEYS[1], 'state') ~= 'queued' then return 0 end
      redis.call('HSET', KEYS[1], 'state', 'running', 'started_at', ARGV[2])
      redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
      redis.call('SADD', KEYS[3], ARGV[1])
      return 1`,
  },
  sgFinalize: {
    numberOfKeys: 5, // execution, events, sessionLock, running, lease
    // ARGV: executionId, now, resultJson, state, retentionS, allowedFromCsv, doneEvent, resultEvent
    lua: `
      local cur = redis.call('HGET', KEYS[1], 'state')
      if not cur then return 0 end
      local allowed = false
      for s in string.gmatch(ARGV[6], '[^,]+') do if s == cur then allowed = true end end
      if not allowed then return 0 end
      redis.call('HSET', KEYS[1], 'state', ARGV[4], 'finished_at', ARGV[2], 'result', ARGV[3])
      redis.call('XADD', KEYS[2], '*', 'type', 'phase', 'data', ARGV[7])
      redis.call('XADD', KEYS[2], '*', 'type', 'result', 'data', ARGV[8])
      if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
      redis.call('SREM', KEYS[4], ARGV[1])
      redis.call('DEL', KEYS[5])
      redis.call('EXPIRE', KEYS[1], ARGV[5])
      redis.call('EXPIRE', KEYS[2], ARGV[5])
      return 1`,
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
