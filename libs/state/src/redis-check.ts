import type { Redis } from 'ioredis';

const config = async (redis: Redis, name: string): Promise<string> => {
  const [, value] = (await redis.config('GET', name)) as string[];
  return value ?? '';
};

/**
 * What an operator's Redis lacks for sandgate, in words for a warning at start-up (empty: nothing): Redis 6.2 or
 * later, `maxmemory-policy noeviction` (BullMQ loses jobs and locks to eviction), and persistence (an append-only
 * file, or at least RDB snapshots) so that queued runs, results and sessions survive a restart. Managed services
 * that disable CONFIG get one warning saying what to check by hand.
 */
export async function redisWarnings(redis: Redis): Promise<string[]> {
  const warnings: string[] = [];
  const version = /redis_version:(\d+)\.(\d+)/.exec(await redis.info('server'));
  if (version && (Number(version[1]) < 6 || (Number(version[1]) === 6 && Number(version[2]) < 2))) {
    warnings.push(`Redis ${version[1]}.${version[2]} is older than 6.2, which sandgate needs`);
  }
  let policy: string | undefined;
  let aof: string | undefined;
  let save: string | undefined;
  try {
    [policy = '', aof = '', save = ''] = await Promise.all(
      ['maxmemory-policy', 'appendonly', 'save'].map((n) => config(redis, n)),
    );
  } catch (err) {
    return [
      ...warnings,
      `could not read Redis's configuration (${(err as Error).message}); make sure it has ` +
        'maxmemory-policy noeviction and persistence (appendonly yes)',
    ];
  }
  if (policy !== 'noeviction') {
    warnings.push(
      `Redis has maxmemory-policy ${policy}: it may evict queued jobs and their locks; ` +
        'set maxmemory-policy noeviction',
    );
  }
  if (aof !== 'yes' && save.trim() === '') {
    warnings.push(
      'Redis keeps no data on disk (appendonly no, no save points): a restart loses every queued run, ' +
        'result and session; set appendonly yes (scripts/start-redis.sh starts one so)',
    );
  } else if (aof !== 'yes') {
    warnings.push(
      `Redis persists by snapshots only (save "${save}"): a restart loses what changed since the last one; ` +
        'set appendonly yes',
    );
  }
  return warnings;
}
