import type { FastifyBaseLogger } from 'fastify';
import type { Quota } from '../plugins/limits.ts';
import type { CallRef } from './run-cancels.ts';

/** One tools/call as the tools see it. */
export interface ToolCall {
  tenant: string;
  /** The JSON-RPC request, so a cancel can find its run; null when the client keeps no MCP session id. */
  ref: CallRef | null;
  /** Aborts when the request's connection closes: stop waiting (the run goes on; only a cancel ends it). */
  signal: AbortSignal;
  /** Sends a progress notification; null when the client sent no progressToken. */
  progress: ((message: string) => Promise<void>) | null;
  log: FastifyBaseLogger;
  /** Counts a run or an upload against the tenant's per-minute quota; throws quota_exceeded over it. */
  quota(kind: Quota): Promise<void>;
}
