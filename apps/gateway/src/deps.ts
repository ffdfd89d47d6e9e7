import { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { QueuedExecution } from '@sandgate/contracts';
import {
  EndedNotices, EventHub, ExecutionStore, SessionStore, WorkerRegistry, createRedis, keys, signingKey, withScripts,
  type Config, type ScriptRedis,
} from '@sandgate/state';
import { UrlSigner, Workspaces } from '@sandgate/storage';
import { Cursors } from './pagination.ts';

/** Everything the gateway's routes use; built once per process, closed on shutdown. */
export interface GatewayDeps {
  config: Config;
  log: Logger;
  redis: ScriptRedis;
  hub: EventHub;
  notices: EndedNotices;
  queue: Queue<QueuedExecution>;
  sessions: SessionStore;
  executions: ExecutionStore;
  workers: WorkerRegistry;
  workspaces: Workspaces;
  signer: UrlSigner;
  /** The deployment's HMAC key (download URLs, cursors, webhook secrets). */
  signingKey: Buffer;
  cursors: Cursors;
  close(): Promise<void>;
}

export const queuePrefix = (config: Config) => `${config.redisPrefix}:q`;

export async function createGatewayDeps(config: Config, log: Logger): Promise<GatewayDeps> {
  const redis = withScripts(createRedis(config.redisUrl, 'sandgate-gateway'));
  // One blocking XREAD at a time: nothing to batch.
  const reader = createRedis(config.redisUrl, 'sandgate-gateway-events', { autoPipelining: false });
  const queueConnection = createRedis(config.redisUrl, 'sandgate-gateway-queue', { autoPipelining: false });
  const k = keys(config.redisPrefix);
  const hub = new EventHub(reader, redis, log);
  const notices = new EndedNotices(createRedis(config.redisUrl, 'sandgate-gateway-notices', { autoPipelining: false }), k);
  await notices.listen();
  const queue = new Queue<QueuedExecution>(config.queueName, {
    connection: queueConnection,
    prefix: queuePrefix(config),
    // The execution record holds the run's state and result: a job has nothing left to tell once it has ended.
    defaultJobOptions: { attempts: 1, removeOnComplete: true, removeOnFail: true },
  });
  const key = await signingKey(redis, k, config.signingKey);
  const signer = new UrlSigner({
    key,
    publicUrl: config.publicUrl,
    ttlSeconds: config.downloadUrlTtlSeconds,
  });
  return {
    config, log, redis, hub, notices, queue, signer, signingKey: key, cursors: new Cursors(key),
    sessions: new SessionStore(redis, k),
    executions: new ExecutionStore(redis, k, { retentionSeconds: config.retentionSeconds }),
    workers: new WorkerRegistry(redis, k),
    workspaces: new Workspaces({ dataDir: config.dataDir, owner: { uid: config.sandboxUid, gid: config.sandboxUid } }),
    async close() {
      await hub.close();
      notices.close();
      await queue.close();
      queueConnection.disconnect();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
