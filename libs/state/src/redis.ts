import { Redis } from 'ioredis';

/**
 * A Redis connection. `maxRetriesPerRequest: null` because BullMQ requires it and because a command
 * should wait for a reconnect rather than fail a request during a short Redis restart.
 * Auto-pipelining batches our own commands of one tick into one write; it is off for BullMQ's
 * connections (`{ autoPipelining: false }`), where ioredis would copy BullMQ's ~60 scripts into
 * every pipeline it builds, costing more CPU than the batching saves.
 */
export function createRedis(url: string, name: string, { autoPipelining = true }: { autoPipelining?: boolean } = {}): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, connectionName: name, enableAutoPipelining: autoPipelining, lazyConnect: false });
}
