/** Every Redis key sandgate uses, in one place. `p` is the configured prefix. */
export const keys = (p: string) => ({
  session: (id: string) => `${p}:session:${id}`,
  sessionLock: (id: string) => `${p}:session:${id}:lock`,
  sessionExecutions: (id: string) => `${p}:session:${id}:executions`,
  tenantSessions: (tenant: string) => `${p}:tenant:${tenant}:sessions`,
  tenantExecutions: (tenant: string) => `${p}:tenant:${tenant}:executions`,
  /** All sessions by expiry time (ms), for the janitor. */
  sessionExpiry: () => `${p}:sessions:expiry`,
  execution: (id: string) => `${p}:execution:${id}`,
  events: (id: string) => `${p}:execution:${id}:events`,
  lease: (id: string) => `${p}:execution:${id}:lease`,
  cancelFlag: (id: string) => `${p}:execution:${id}:cancel`,
  /** Ids of executions in state running, for the reaper. */
  running: () => `${p}:running`,
  /** Worker id → last heartbeat (ms). */
  workers: () => `${p}:workers`,
  signingKey: () => `${p}:signing-key`,
  cancelChannel: () => `${p}:cancel`,
  /** Where finalisation tells one gateway process that a run it waits for has ended (EndedNotices). */
  endedChannel: (listener: string) => `${p}:ended:${listener}`,
  /** The run of an MCP tools/call in flight, by tenant, MCP session and JSON-RPC request id (RunCancels). */
  mcpCall: (tenant: string, mcpSession: string, requestId: string) =>
    `${p}:tenant:${tenant}:mcp:${mcpSession}:${requestId}`,
});
export type Keys = ReturnType<typeof keys>;
