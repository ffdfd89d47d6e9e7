/**
 * Time indexes: sorted sets whose members all score 0 and read `<ms, 13 digits>:<id>`, so that their lexicographic
 * order is creation order with the id breaking ties. A page starts right after a member (ZRANGE … BYLEX), exactly,
 * whatever was added or removed meanwhile; trimming by age is one ZREMRANGEBYLEX.
 */
import type { Redis } from 'ioredis';

export const indexMember = (at: number, id: string) => `${String(Math.floor(at)).padStart(13, '0')}:${id}`;
const idOf = (member: string) => member.slice(member.indexOf(':') + 1);

/** Lua: ZADD of a member (KEYS[i], at, id) and the trim of members older than `old`, as functions scripts can call. */
export const TIME_INDEX_LUA = `
  local function indexMember(at, id) return string.format('%013d', tonumber(at)) .. ':' .. id end
  local function indexAdd(key, at, id) redis.call('ZADD', key, 0, indexMember(at, id)) end
  local function indexTrim(key, old)
    redis.call('ZREMRANGEBYLEX', key, '-', '(' .. string.format('%013d', tonumber(old)))
  end`;

export interface Page<T> {
  items: T[];
  /** Where the next page starts (the last member read), or null when the index has no more. */
  next: string | null;
}

/**
 * Newest first, from right after `after` (a member; null = the newest): loads the records of up to `limit` members
 * that `load` still finds (null: expired or filtered out). Reads at most `maxScan` members per call, so a filter that
 * keeps little cannot make one request read the whole index: the page is then shorter, and `next` says go on.
 */
export async function pageIndex<T>(
  redis: Redis,
  key: string,
  after: string | null,
  limit: number,
  load: (ids: string[]) => Promise<(T | null)[]>,
  maxScan = 1000,
): Promise<Page<T>> {
  const items: T[] = [];
  let from = after === null ? '+' : `(${after}`;
  for (let scanned = 0; scanned < maxScan;) {
    const want = Math.min(Math.max(limit - items.length, 10), maxScan - scanned);
    const members = await redis.zrange(key, from, '-', 'BYLEX', 'REV', 'LIMIT', 0, want);
    if (members.length === 0) return { items, next: null };
    scanned += members.length;
    const loaded = await load(members.map(idOf));
    for (let i = 0; i < members.length; i++) {
      const item = loaded[i];
      if (item === null || item === undefined) continue;
      items.push(item);
      if (items.length === limit) {
        const more =
          i < members.length - 1 ||
          (await redis.zrange(key, `(${members[i]}`, '-', 'BYLEX', 'REV', 'LIMIT', 0, 1)).length > 0;
        return { items, next: more ? members[i]! : null };
      }
    }
    if (members.length < want) return { items, next: null };
    from = `(${members[members.length - 1]}`;
  }
  return { items, next: from.slice(1) };
}
