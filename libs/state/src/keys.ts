/** Every Redis key sandgate uses, in one place. `p` is the configured prefix. */
export const keys = (p: string) => ({
  session: (id: string) => `${p}:session:${id}`,
  sessionLock: (id: string) => `${p}:session:${id}:lock`,
  /** A session's executions within the retention, as time-index members (time-index.ts). */
  sessionExecutions: (id: string) => `${p}:session:${id}:execution-list`,
  /**
   * A tenant's live (not paused) sessions by when they pause if left idle (ms): those not past it count against
   * SANDGATE_MAX_SESSIONS.
   */
  tenantSessions: (tenant: string) => `${p}:tenant:${tenant}:sessions`,
  /** Every live (not paused) session by when it pauses if left idle (ms): the auto-pause and the sweep read it. */
  sessionIdle: () => `${p}:sessions:idle`,
  /** A session's snapshots: name → JSON {created_at, size_bytes, variables}. */
  sessionSnapshots: (id: string) => `${p}:session:${id}:snapshots`,
  /** What a session operation answered (SessionOps), kept a few minutes for a gateway that missed the notice. */
  sessionOp: (opId: string) => `${p}:session-op:${opId}`,
  /** A signed terminal URL that was used: each opens one terminal (kept until it would have expired anyway). */
  /** A session's file events (FileEventLog): a stream, trimmed to the events kept and expiring when unused. */
  fileEvents: (id: string) => `${p}:session:${id}:file-events`,
  /** Which gateway process feeds the sandbox's file events of a session into fileEvents (a lease it renews). */
  fileWatchLease: (id: string) => `${p}:session:${id}:file-watch`,
  usedTerminalUrl: (sig: string) => `${p}:terminal-url:${sig}`,
  /** A tenant's live sessions, newest last, as time-index members (time-index.ts): what GET /v1/sessions pages. */
  tenantSessionList: (tenant: string) => `${p}:tenant:${tenant}:session-list`,
  /** A tenant's executions within the retention, as time-index members. */
  tenantExecutions: (tenant: string) => `${p}:tenant:${tenant}:execution-list`,
  /** Session id → bytes of its files, per tenant (StorageLedger). */
  tenantStorage: (tenant: string) => `${p}:tenant:${tenant}:storage`,
  /** A tenant's saved scripts: name → record (ScriptStore). */
  tenantScripts: (tenant: string) => `${p}:tenant:${tenant}:scripts`,
  /** A tenant's saved scripts by content hash: sha256 → name. */
  tenantScriptHashes: (tenant: string) => `${p}:tenant:${tenant}:script-hashes`,
  /** A tenant's queued executions, by their rank in the tenant's queue (fair scheduling). */
  tenantQueued: (tenant: string) => `${p}:tenant:${tenant}:queued`,
  /** Ids of a tenant's running executions (SANDGATE_TENANT_MAX_RUNNING). */
  tenantRunning: (tenant: string) => `${p}:tenant:${tenant}:running`,
  /** What session(id) is, without the id: Lua that checks whether a volume's users are live builds their keys. */
  sessionPrefix: () => `${p}:session:`,
  /** A tenant's volumes: name → volume id (VolumeStore). */
  tenantVolumes: (tenant: string) => `${p}:tenant:${tenant}:volumes`,
  /** What volume(id) is, without the id (Lua builds a volume's keys from the id it looked up by name). */
  volumePrefix: () => `${p}:volume:`,
  volume: (id: string) => `${p}:volume:${id}`,
  /** The sessions that mount a volume: session id → `{path, read_only}` (JSON). */
  volumeMounts: (id: string) => `${p}:volume:${id}:mounts`,
  /** All sessions (paused too) by when they are deleted if left alone (ms), for the janitor. */
  sessionExpiry: () => `${p}:sessions:expiry`,
  execution: (id: string) => `${p}:execution:${id}`,
  /** What execution(id) is, without the id: Lua that checks an index's members builds their keys from it. */
  executionPrefix: () => `${p}:execution:`,
  events: (id: string) => `${p}:execution:${id}:events`,
  lease: (id: string) => `${p}:execution:${id}:lease`,
  /** The language and code of a completed run, kept for an hour so that it can be saved as a script. */
  executionCode: (id: string) => `${p}:execution:${id}:code`,
  cancelFlag: (id: string) => `${p}:execution:${id}:cancel`,
  /** Ids of executions in state queued by creation time (ms), for housekeeping to find runs never enqueued. */
  queued: () => `${p}:queued`,
  /** Ids of executions in state running, for the reaper. */
  running: () => `${p}:running`,
  /** Worker id → last heartbeat (ms). */
  workers: () => `${p}:workers`,
  /** Worker id → its latest stats snapshot (JSON), published with its heartbeat. */
  workerStats: () => `${p}:workers:stats`,
  /** Gateway id → its latest stats snapshot (JSON): what only a gateway process knows, like its SSE subscribers. */
  gatewayStats: () => `${p}:gateways:stats`,
  /** The deployment's figures over the last hour, newest first (StatsHistory), capped. */
  statsHistory: () => `${p}:stats:history`,
  /** Claimed by the one gateway that samples the history in this slot of time. */
  statsHistorySlot: (slot: number) => `${p}:stats:history:slot:${slot}`,
  /** Deployment-wide counters (DeploymentStats). */
  statsCounters: () => `${p}:stats:counters`,
  statsHistogram: (name: string) => `${p}:stats:histogram:${name}`,
  signingKey: () => `${p}:signing-key`,
  /** A sandbox Pod's grant to read and write one session's files, by the sha256 of its token (TransferGrants). */
  transferGrant: (tokenHash: string) => `${p}:transfer:${tokenHash}`,
  /** Ended executions with a callback_url whose delivery is not queued yet, by end time (ms): see webhooks. */
  webhooksDue: () => `${p}:webhooks:due`,
  /** The names of the operator's templates (TemplateStore). */
  templates: () => `${p}:templates`,
  /** A template: its recipe, its state and its image. */
  template: (name: string) => `${p}:template:${name}`,
  /** Where a template's change is announced (its name): workers keep their template pools by it. */
  templatesChanged: () => `${p}:templates:changed`,
  /** A template build: its spec and how far it got. */
  build: (id: string) => `${p}:build:${id}`,
  /** A template build's log, as a stream of `log` events ending with `result` (read as SSE). */
  buildEvents: (id: string) => `${p}:build:${id}:events`,
  /** The build of a recipe in flight, by the recipe's hash: held while queued, then renewed by its worker. */
  buildLease: (hash: string) => `${p}:build-lease:${hash}`,
  cancelChannel: () => `${p}:cancel`,
  /** Where a session that became private is announced: the egress proxy cuts its connections at once. */
  privateChannel: () => `${p}:private`,
  /** Where finalisation tells one gateway process that a run it waits for has ended (EndedNotices). */
  endedChannel: (listener: string) => `${p}:ended:${listener}`,
  /** The run of an MCP tools/call in flight, by tenant, MCP session and JSON-RPC request id (RunCancels). */
  mcpCall: (tenant: string, mcpSession: string, requestId: string) =>
    `${p}:tenant:${tenant}:mcp:${mcpSession}:${requestId}`,
});
export type Keys = ReturnType<typeof keys>;

/** The prefix of BullMQ's keys (the execution queue, the webhook queue): gateways and workers must agree on it. */
export const queuePrefix = (redisPrefix: string) => `${redisPrefix}:q`;

/** The queue of template builds, beside the execution queue: builds take minutes and never hold a run's slot. */
export const buildQueueName = (queueName: string) => `${queueName}-builds`;

/** What the build queue carries: a build's id (`build`), or nothing (`prune`: remove unused template images). */
export interface BuildJob {
  build_id?: string;
}
