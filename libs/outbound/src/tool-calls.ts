import { Ajv, type ValidateFunction } from 'ajv';
import type { HttpTool } from '@sandgate/config';

/** How far one call may go: its time, and the bytes of its answer. */
export interface ToolLimits {
  timeoutMs: number;
  maxResponseBytes: number;
}

export type ToolAnswer = { ok: true; result: unknown } | { ok: false; error: string };

const ajv = new Ajv({ allErrors: true, strict: false });
const validators = new WeakMap<object, ValidateFunction>();

/** Checks `args` against the tool's input_schema; the problem, for the caller, or undefined. */
export function argumentsProblem(tool: { input_schema?: Record<string, unknown> }, args: unknown): string | undefined {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return 'the arguments must be an object';
  if (!tool.input_schema) return undefined;
  let validate = validators.get(tool.input_schema);
  if (!validate) {
    try {
      validate = ajv.compile(tool.input_schema);
    } catch (err) {
      return `the tool's input_schema is not valid JSON Schema: ${(err as Error).message}`;
    }
    validators.set(tool.input_schema, validate);
  }
  if (validate(args)) return undefined;
  return ajv.errorsText(validate.errors, { dataVar: 'args' });
}

/**
 * Calls an HTTP tool: POSTs the arguments as JSON, within `limits`, and answers its JSON (or its text). A non-2xx
 * status, a timeout or an answer over the size limit is a failed call with the reason; nothing here throws.
 */
export async function callHttpTool(tool: HttpTool, args: unknown, limits: ToolLimits): Promise<ToolAnswer> {
  const problem = argumentsProblem(tool, args);
  if (problem !== undefined) return { ok: false, error: `invalid arguments: ${problem}` };
  try {
    const res = await fetch(tool.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...tool.headers },
      body: JSON.stringify(args),
      redirect: 'error',
      signal: AbortSignal.timeout(limits.timeoutMs),
    });
    const declared = Number(res.headers.get('content-length') ?? '0');
    if (declared > limits.maxResponseBytes) {
      await res.body?.cancel();
      return { ok: false, error: `the answer is ${declared} bytes, over the limit of ${limits.maxResponseBytes}` };
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body ?? []) {
      size += (chunk as Uint8Array).length;
      if (size > limits.maxResponseBytes) {
        return { ok: false, error: `the answer is over the limit of ${limits.maxResponseBytes} bytes` };
      }
      chunks.push(Buffer.from(chunk as Uint8Array));
    }
    const text = Buffer.concat(chunks).toString('utf8');
    if (!res.ok) return { ok: false, error: `the tool answered ${res.status}: ${text.slice(0, 500)}` };
    if ((res.headers.get('content-type') ?? '').includes('json')) {
      try {
        return { ok: true, result: JSON.parse(text) as unknown };
      } catch {
        return { ok: false, error: 'the tool answered JSON that does not parse' };
      }
    }
    return { ok: true, result: text };
  } catch (err) {
    const e = err as Error;
    if (e.name === 'TimeoutError') return { ok: false, error: `the tool did not answer within ${limits.timeoutMs} ms` };
    return {
      ok: false,
      error: `the tool could not be reached: ${e.cause instanceof Error ? e.cause.message : e.message}`,
    };
  }
}
