import type { ToolSource } from '@sandgate/config';
import { ToolCaller, type ToolAnswer, type ToolLimits } from '@sandgate/outbound';
import type { ToolCallRecord } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';
import type { ToolCallFrame } from '../agent/agent-frames.ts';

/** What tool calls a backend may make: the tenant's tools, and the bounds of one run's calls. */
export interface ToolSettings extends ToolLimits {
  /** Calls one run may make; the next ones fail without being made. */
  maxCalls: number;
  /** The tools of a tenant (SANDGATE_TOOLS): none means the run gets no tool channel. */
  toolsOf(tenant: string): Record<string, ToolSource>;
  /** Makes the calls (HTTP endpoints, MCP servers). */
  caller: ToolCaller;
}

/** Whether a tenant has tools: its runs then need an agent, which gives the code a tool channel. */
export const hasTools = (settings: ToolSettings | undefined, tenant: string): boolean =>
  settings !== undefined && Object.keys(settings.toolsOf(tenant)).length > 0;

/**
 * One run's tool calls: each checked against the tenant's tools and the run's bounds, made by the worker (the
 * sandbox reaches no network), reported as tool_call / tool_result events and recorded for the result.
 */
export class ToolBroker {
  readonly calls: ToolCallRecord[] = [];

  readonly #tenant: string;
  readonly #tools: Record<string, ToolSource>;
  readonly #settings: ToolSettings;
  readonly #events: EventSink;
  constructor(tenant: string, tools: Record<string, ToolSource>, settings: ToolSettings, events: EventSink) {
    this.#tenant = tenant;
    this.#tools = tools;
    this.#settings = settings;
    this.#events = events;
  }

  /** The broker of a job, or undefined when its tenant has no tools (the run then gets no tool channel). */
  static of(settings: ToolSettings | undefined, tenant: string, events: EventSink): ToolBroker | undefined {
    const tools = settings?.toolsOf(tenant) ?? {};
    return Object.keys(tools).length > 0 ? new ToolBroker(tenant, tools, settings!, events) : undefined;
  }

  async handle(frame: ToolCallFrame): Promise<ToolAnswer> {
    const { call, name, args } = frame;
    const started = performance.now();
    this.#events.toolCall?.({ call, name, args });
    const answer = await this.#answer(name, args);
    const duration_ms = Math.round(performance.now() - started);
    this.#events.toolResult?.({ call, name, ...answer, duration_ms });
    this.calls.push({ name, ok: answer.ok, ...(answer.ok ? {} : { error: answer.error }), duration_ms });
    return answer;
  }

  async #answer(name: string, args: unknown): Promise<ToolAnswer> {
    if (this.calls.length >= this.#settings.maxCalls) {
      return {
        ok: false,
        error: `this run has made its ${this.#settings.maxCalls} tool calls (SANDGATE_TOOL_MAX_CALLS)`,
      };
    }
    const answer = await this.#settings.caller.call(this.#tenant, this.#tools, name, args, this.#settings);
    return (
      answer ?? { ok: false, error: `no tool "${name}" for this tenant; its tools: ${ToolCaller.offered(this.#tools)}` }
    );
  }
}
