import { Redis } from 'ioredis';

/**
 * A Redis connection. `maxRetriesPerRequest: null` because BullMQ requires it and because a command
 * should wait for a reconnect rather than fail a request during a short Redis restart.
 */
export function createRedis(url: string, name: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, connectionName: name, enableAutoPipelining: true, lazyConnect: false });
}
