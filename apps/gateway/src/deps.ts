import { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { QueuedExecution } from '@sandgate/contracts';
import {
  EndedNotices,
  EventHub,
  ExecutionStore,
  RedisWatchdog,
  SessionStore,
  WorkerRegistry,
  createRedis,
  keys,
  queuePrefix,
  signingKey,
  watchOutages,
  whenReady,
  withLuaScripts,
  type Keys,
  type LuaRedis,
  StorageLedger,
  TransferGrants,
  ScriptStore,
  TemplateStore,
  buildQueueName,
  type BuildJob,
  VolumeStore,
} from '@sandgate/state';
import { type Config } from '@sandgate/config';
import { openWorkspaces, UrlSigner, type Workspaces } from '@sandgate/storage';
import { GatewayMetrics } from './metrics.ts';
import { Cursors } from './pagination.ts';
import { ExecutionControl } from './core/execution-control.ts';
import { ScriptLibrary } from './core/script-library.ts';
import { ServiceManager } from './core/service-manager.ts';
import { SessionControl } from './core/session-control.ts';
import { SessionFiles } from './core/session-files.ts';
import { SessionLifecycle } from './core/session-lifecycle.ts';
import { SystemStatsReader } from './core/system-stats.ts';
import { TenantTools } from './core/tenant-tools.ts';
import { TemplateControl } from './core/template-control.ts';
import { VolumeControl } from './core/volume-control.ts';
import { TerminalControl } from './core/terminal-control.ts';
import { SessionMetricsReader } from './core/session-metrics.ts';
import { StatsHistorySampler } from './core/stats-history.ts';
import { FileEvents } from './core/file-events.ts';

/** Everything the gateway's routes use; built once per process, closed on shutdown. */
export interface GatewayDeps {
  config: Config;
  log: Logger;
  redis: LuaRedis;
  /** Every Redis key, under this deployment's prefix. */
  keys: Keys;
  hub: EventHub;
  notices: EndedNotices;
  queue: Queue<QueuedExecution>;
  sessions: SessionStore;
  /** Bytes each tenant stores, per session (SANDGATE_TENANT_STORAGE_BYTES). */
  ledger: StorageLedger;
  executions: ExecutionStore;
  workers: WorkerRegistry;
  workspaces: Workspaces;
  /** The tenants' saved scripts. */
  scripts: ScriptStore;
  /** The operator's templates and their builds. */
  templates: TemplateStore;
  /** Template builds, for the workers (apps/worker/src/template-builds.ts). */
  builds: Queue<BuildJob>;
  /** The tenants' volumes and the sessions that mount them. */
  volumes: VolumeStore;
  /** Sandbox Pods' tokens for a session's files (the Kubernetes backend's stage and harvest). */
  transfers: TransferGrants;
  signer: UrlSigner;
  /** The deployment's numbers (/v1/system/stats) and this process's (/metrics). */
  stats: SystemStatsReader;
  /** The deployment's figures over the last hour (/v1/system/stats/history). */
  statsHistory: StatsHistorySampler;
  metrics: GatewayMetrics;
  /** Whether Redis answers now: requests fail fast with redis_unavailable while it does not. */
  watchdog: RedisWatchdog;
  /** Aborted when the gateway starts to shut down: SSE streams and long polls end early (clients go elsewhere). */
  readonly draining: AbortSignal;
  drain(): void;
  /** The deployment's HMAC key (download URLs, cursors, webhook secrets). */
  signingKey: Buffer;
  cursors: Cursors;
  /**
   * The gateway's logic, free of HTTP (src/core/), built once here: what the REST routes and the MCP tools call.
   * Each holds these deps, so the ones built later may use the earlier ones.
   */
  executionControl: ExecutionControl;
  scriptLibrary: ScriptLibrary;
  sessionControl: SessionControl;
  sessionFiles: SessionFiles;
  volumeControl: VolumeControl;
  tenantTools: TenantTools;
  /** Users' long-running programs in their sessions' sandboxes (POST /v1/sessions/:id/services). */
  serviceManager: ServiceManager;
  /** Pause, resume, fork, snapshots and undo of sessions (done by workers). */
  sessionLifecycle: SessionLifecycle;
  /** Terminals in sessions' sandboxes (GET /v1/sessions/:id/terminal). */
  terminalControl: TerminalControl;
  /** Sessions' live CPU, memory, processes and disk (GET /v1/sessions/:id/metrics). */
  sessionMetrics: SessionMetricsReader;
  /** File events of sessions (GET /v1/sessions/:id/files/events). */
  fileEvents: FileEvents;
  templateControl: TemplateControl;
  close(): Promise<void>;
}

export async function createGatewayDeps(config: Config, log: Logger): Promise<GatewayDeps> {
  // The connections requests use fail fast: while Redis is away a request gets 503 redis_unavailable at once.
  const redis = withLuaScripts(createRedis(config, 'sandgate-gateway', { failFast: true }));
  // One blocking XREAD at a time: nothing to batch.
  const reader = createRedis(config, 'sandgate-gateway-events', { autoPipelining: false });
  const queueConnection = createRedis(config, 'sandgate-gateway-queue', {
    autoPipelining: false,
    failFast: true,
  });
  const unwatch = watchOutages(redis, log);
  await Promise.all([whenReady(redis), whenReady(queueConnection)]);
  const k = keys(config.redisPrefix);
  const hub = new EventHub(reader, redis, log);
  const notices = new EndedNotices(createRedis(config, 'sandgate-gateway-notices', { autoPipelining: false }), k);
  await notices.listen();
  const queue = new Queue<QueuedExecution>(config.queueName, {
    connection: queueConnection,
    prefix: queuePrefix(config.redisPrefix),
    // The execution record holds the run's state and result: a job has nothing left to tell once it has ended.
    defaultJobOptions: { attempts: 1, removeOnComplete: true, removeOnFail: true },
  });
  const builds = new Queue<BuildJob>(buildQueueName(config.queueName), {
    connection: queueConnection,
    prefix: queuePrefix(config.redisPrefix),
    defaultJobOptions: { attempts: 1, removeOnComplete: true, removeOnFail: true },
  });
  const key = await signingKey(redis, k, config.signingKey);
  const signer = new UrlSigner({
    key,
    publicUrl: config.publicUrl,
    ttlSeconds: config.downloadUrlTtlSeconds,
  });
  const draining = new AbortController();
  const watched = createRedis(config, 'sandgate-gateway-watchdog', { autoPipelining: false, failFast: true });
  // Requests are refused while the watchdog's connection is not ready: it must be before the first one comes.
  await whenReady(watched);
  const watchdog = new RedisWatchdog(watched);
  const workspaces = await openWorkspaces({
    dataDir: config.dataDir,
    owner: { uid: config.sandboxUid, gid: config.sandboxUid },
    sessionDiskBytes: config.sessionDiskBytes,
    warn: (message) => log.warn(message),
  });
  const stats = new SystemStatsReader(redis, k, queue);
  const metrics = new GatewayMetrics(stats, redis, k);
  metrics.start();
  const statsHistory = new StatsHistorySampler(redis, k, stats, config.statsHistorySeconds, (err) =>
    log.warn({ err }, 'sampling the stats history failed'),
  );
  // The core's classes hold the deps they are part of: the object is completed below, before anyone uses it.
  const deps = {
    config,
    log,
    redis,
    keys: k,
    hub,
    notices,
    queue,
    signer,
    stats,
    statsHistory,
    metrics,
    signingKey: key,
    cursors: new Cursors(key),
    watchdog,
    draining: draining.signal,
    drain: () => draining.abort(),
    sessions: new SessionStore(redis, k),
    ledger: new StorageLedger(redis, k),
    transfers: new TransferGrants(redis, k),
    scripts: new ScriptStore(redis, k),
    templates: new TemplateStore(redis, k),
    builds,
    volumes: new VolumeStore(redis, k),
    executions: new ExecutionStore(redis, k, { retentionSeconds: config.retentionSeconds }),
    workers: new WorkerRegistry(redis, k),
    workspaces,
    async close() {
      await deps.tenantTools.close();
      statsHistory.close();
      await deps.fileEvents.close();
      await metrics.close();
      watchdog.close();
      unwatch();
      await hub.close();
      notices.close();
      await queue.close();
      await builds.close();
      await workspaces.close();
      queueConnection.disconnect();
      await redis.quit().catch(() => redis.disconnect());
    },
  } as GatewayDeps;
  // In the order each needs the others: a script runs as an execution, a service starts as one.
  deps.scriptLibrary = new ScriptLibrary(deps);
  deps.executionControl = new ExecutionControl(deps);
  deps.sessionControl = new SessionControl(deps);
  deps.sessionFiles = new SessionFiles(deps);
  deps.volumeControl = new VolumeControl(deps);
  deps.tenantTools = new TenantTools(deps);
  deps.serviceManager = new ServiceManager(deps);
  deps.sessionLifecycle = new SessionLifecycle(deps);
  deps.terminalControl = new TerminalControl(deps);
  deps.sessionMetrics = new SessionMetricsReader(deps);
  deps.fileEvents = new FileEvents(deps);
  deps.templateControl = new TemplateControl(deps);
  // The templates file is the operator's word at every start: what it declares is made (built if it changed).
  await deps.templateControl.applyFile();
  return deps;
}
