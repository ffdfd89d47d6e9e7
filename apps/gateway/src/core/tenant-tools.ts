import { toolsFor } from '@sandgate/config';
import { ToolCaller } from '@sandgate/outbound';
import { SandgateError, type Tool, type ToolCallResult } from '@sandgate/contracts';
import type { GatewayDeps } from '../deps.ts';

/**
 * The tools the operator offers a tenant (SANDGATE_TOOLS): listed, and called once with no sandbox (the fast path),
 * as GET/POST /v1/tools and the MCP tools list_tools and call_tool both do it.
 */
export class TenantTools {
  readonly #caller = new ToolCaller();
  readonly #limits: { timeoutMs: number; maxResponseBytes: number };

  readonly #d: GatewayDeps;
  constructor(d: GatewayDeps) {
    this.#d = d;
    this.#limits = { timeoutMs: d.config.toolTimeoutMs, maxResponseBytes: d.config.toolMaxResponseBytes };
  }

  /** The tenant's tools; an MCP server that cannot be listed is left out, and `failed` told. */
  list(tenant: string, failed: (server: string, err: unknown) => void): Promise<Tool[]> {
    return this.#caller.list(tenant, toolsFor(this.#d.config.tools, tenant), this.#limits, failed);
  }

  /** One call; tool_not_found for a tool the tenant has not, validation_failed for arguments its schema refuses. */
  async call(tenant: string, name: string, args: unknown): Promise<ToolCallResult> {
    const started = performance.now();
    const answer = await this.#caller.call(tenant, toolsFor(this.#d.config.tools, tenant), name, args, this.#limits);
    if (answer === undefined) throw new SandgateError('tool_not_found', `no tool "${name}" for this tenant`);
    if (!answer.ok && answer.error.startsWith('invalid arguments: ')) {
      throw new SandgateError('validation_failed', answer.error);
    }
    return { name, ...answer, duration_ms: Math.round(performance.now() - started) };
  }

  close(): Promise<void> {
    return this.#caller.close();
  }
}
