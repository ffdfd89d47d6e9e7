/**
 * Lua shared by the volume scripts. A session is live while its record exists and it has not expired (idle, busy or
 * paused: a paused session keeps its expiry, the end of its retention), or while a run holds its lock. A volume's
 * users are the live sessions among those that mounted it; the others (deleted, expired) are dropped as they are met,
 * so no deletion path needs to remember the volumes of a session.
 */
const LIVE_USERS = `
  local function sessionLive(sessionPrefix, expiry, sid, now)
    if redis.call('EXISTS', sessionPrefix .. sid) == 0 then return false end
    local exp = redis.call('ZSCORE', expiry, sid)
    if exp and tonumber(exp) >= now then return true end
    return redis.call('EXISTS', sessionPrefix .. sid .. ':lock') == 1
  end
  local function liveUsers(mounts, sessionPrefix, expiry, now)
    local flat = redis.call('HGETALL', mounts)
    local out = {}
    for i = 1, #flat, 2 do
      if sessionLive(sessionPrefix, expiry, flat[i], now) then
        out[#out + 1] = flat[i]
        out[#out + 1] = flat[i + 1]
      else
        redis.call('HDEL', mounts, flat[i])
      end
    end
    return out
  end`;

/** The volume scripts, registered with the others by withLuaScripts. */
export const VOLUME_SCRIPTS = {
  sgCreateVolume: {
    numberOfKeys: 3, // tenantVolumes, volume, tenantStorage
    // ARGV: name, id, tenant, sizeBytes, now, maxVolumes, storageLimit (0: none).
    // { 'ok' } | { 'exists' } | { 'max' } | { 'quota', used }: the size is taken from the tenant's storage quota here,
    // in the same step as the volume is made, so two creations cannot both fit in the room for one.
    lua: `
      if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return { 'exists' } end
      if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[6]) then return { 'max' } end
      local limit = tonumber(ARGV[7])
      if limit > 0 then
        local used = 0
        for _, v in ipairs(redis.call('HVALS', KEYS[3])) do used = used + (tonumber(v) or 0) end
        if used + tonumber(ARGV[4]) > limit then return { 'quota', tostring(used) } end
      end
      redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
      redis.call('HSET', KEYS[2], 'tenant', ARGV[3], 'name', ARGV[1], 'size', ARGV[4], 'created_at', ARGV[5])
      redis.call('HSET', KEYS[3], ARGV[2], ARGV[4])
      return { 'ok' }`,
  },
  sgDeleteVolume: {
    numberOfKeys: 3, // tenantVolumes, tenantStorage, sessionExpiry
    // ARGV: name, now, volumePrefix, sessionPrefix.
    // { 'ok', id } | { 'not_found' } | { 'in_use', sessionId, mountJson, ... }
    lua: `${LIVE_USERS}
      local id = redis.call('HGET', KEYS[1], ARGV[1])
      if not id then return { 'not_found' } end
      local users = liveUsers(ARGV[3] .. id .. ':mounts', ARGV[4], KEYS[3], tonumber(ARGV[2]))
      if #users > 0 then return { 'in_use', unpack(users) } end
      redis.call('HDEL', KEYS[1], ARGV[1])
      redis.call('DEL', ARGV[3] .. id, ARGV[3] .. id .. ':mounts')
      redis.call('HDEL', KEYS[2], id)
      return { 'ok', id }`,
  },
  sgClaimVolumes: {
    numberOfKeys: 3, // tenantVolumes, session, sessionExpiry
    // ARGV: sessionId, tenant, now, volumePrefix, sessionPrefix, mounts (JSON: [{name, path, read_only}]).
    // Every volume exists and no read-write mount meets another live writer, or nothing is claimed:
    // { 'ok', mountsJson } (with each volume's id and size) | { 'no_session' } | { 'not_found', name } |
    // { 'in_use', name, writerSessionId }
    lua: `${LIVE_USERS}
      if redis.call('HGET', KEYS[2], 'tenant') ~= ARGV[2] then return { 'no_session' } end
      local now = tonumber(ARGV[3])
      local mounts = cjson.decode(ARGV[6])
      for _, m in ipairs(mounts) do
        local id = redis.call('HGET', KEYS[1], m.name)
        if not id then return { 'not_found', m.name } end
        m.id = id
        m.size_bytes = tonumber(redis.call('HGET', ARGV[4] .. id, 'size'))
        if not m.read_only then
          local users = liveUsers(ARGV[4] .. id .. ':mounts', ARGV[5], KEYS[3], now)
          for i = 1, #users, 2 do
            if users[i] ~= ARGV[1] and not cjson.decode(users[i + 1]).read_only then
              return { 'in_use', m.name, users[i] }
            end
          end
        end
      end
      for _, m in ipairs(mounts) do
        redis.call('HSET', ARGV[4] .. m.id .. ':mounts', ARGV[1], cjson.encode({ path = m.path, read_only = m.read_only }))
      end
      local json = cjson.encode(mounts)
      redis.call('HSET', KEYS[2], 'volumes', json)
      return { 'ok', json }`,
  },
  sgVolumeUsers: {
    numberOfKeys: 2, // volumeMounts, sessionExpiry
    // ARGV: now, sessionPrefix. The live users, as sessionId, mountJson pairs; the others are dropped.
    lua: `${LIVE_USERS}
      return liveUsers(KEYS[1], ARGV[2], KEYS[2], tonumber(ARGV[1]))`,
  },
} as const;
