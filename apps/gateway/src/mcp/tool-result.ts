import type { CallToolResult, ImageContent } from '@modelcontextprotocol/sdk/types.js';
import { SandgateError, type McpToolError } from '@sandgate/contracts';

/** A tool's failure with a code of the MCP tool contract that the REST API has no use for (artifact_too_large). */
export class ToolFailure extends Error {
  constructor(readonly body: Omit<McpToolError, 'session_id'>) {
    super(body.message);
    this.name = 'ToolFailure';
  }
}

/** What a tool returns: the JSON object of the contract, and images a model can look at. */
export interface ToolOutput {
  result: Record<string, unknown>;
  images?: ImageContent[];
}

/** The JSON object as structuredContent, and as text for clients that read only text. */
export function toolResult({ result, images = [] }: ToolOutput): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(result) }, ...images], structuredContent: result };
}

export function toolError(error: McpToolError): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(error) }], structuredContent: error, isError: true };
}

export interface ErrorContext {
  sessionId: string | undefined;
  /** Path the call was about, as the client gave it. */
  path: string | undefined;
  maxSessions: number;
}

/** The messages the contract words itself; any other code keeps the message sandgate's REST API gives. */
const CONTRACT_MESSAGES: Partial<Record<string, (c: ErrorContext) => string>> = {
  file_exists: (c) => `${c.path} already exists. Set overwrite=true to replace.`,
  session_busy: () => 'A run is already in progress for this session. Wait for it to complete.',
  max_sessions: (c) => `Maximum ${c.maxSessions} concurrent sessions reached. Close an existing session first.`,
  session_not_found: (c) => `No active session with id ${c.sessionId}`,
  not_found: (c) => `No artifact at ${c.path}`,
};

/**
 * A thrown error as the contract's error object. sandgate's file_not_found is the contract's not_found; an error
 * that is not the client's gets `internal` and no detail (it is logged by the caller).
 */
export function errorObject(err: unknown, c: ErrorContext): McpToolError {
  const session = c.sessionId === undefined ? {} : { session_id: c.sessionId };
  if (err instanceof ToolFailure) return { ...err.body, ...session };
  if (!(err instanceof SandgateError)) {
    return { error: 'internal', message: 'an internal error occurred; it has been logged', ...session };
  }
  const code = err.code === 'file_not_found' ? 'not_found' : err.code;
  return { error: code, message: CONTRACT_MESSAGES[code]?.(c) ?? err.message, ...session };
}
