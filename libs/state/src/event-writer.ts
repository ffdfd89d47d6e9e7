import type { Artifact, Phase, ResumedEvent, TestCase, ToolCallEvent, ToolResultEvent } from '@sandgate/contracts';
import type { LuaRedis } from './lua-scripts.ts';

/**
 * Appends one execution's events to its Redis stream. Output is coalesced (up to `maxChunk`
 * bytes or `lingerMs`) so a program printing one byte at a time costs a few writes, not one each;
 * any other event flushes pending output first, so the stream keeps the order things happened in.
 * Events of one turn of the event loop go out as one command, so a blocked reader wakes once for them,
 * and what is still unsent when the run ends is handed to finalisation (takePending) instead.
 */
export class EventWriter {
  #pending: { type: 'stdout' | 'stderr' | 'log'; text: string } | null = null;
  #timer: NodeJS.Timeout | null = null;
  /** Events not sent yet, as type, data pairs. */
  #unsent: string[] = [];
  #sendScheduled = false;
  #writes: Promise<unknown> = Promise.resolve();
  #failed: unknown = null;

  readonly #redis: LuaRedis;
  readonly #key: string;
  readonly #opts: { lingerMs?: number; maxChunk?: number };
  constructor(redis: LuaRedis, key: string, opts: { lingerMs?: number; maxChunk?: number } = {}) {
    this.#redis = redis;
    this.#key = key;
    this.#opts = opts;
  }

  phase(phase: Phase): void {
    this.#append('phase', { phase, at: new Date().toISOString() });
  }
  artifact(artifact: Artifact): void {
    this.#append('artifact', { artifact });
  }
  testResult(test: TestCase): void {
    this.#append('test_result', test);
  }
  toolCall(call: ToolCallEvent): void {
    this.#append('tool_call', call);
  }
  toolResult(result: ToolResultEvent): void {
    this.#append('tool_result', result);
  }
  resumed(resumed: ResumedEvent): void {
    this.#append('resumed', resumed);
  }
  stdout(text: string): void {
    this.#output('stdout', text);
  }
  stderr(text: string): void {
    this.#output('stderr', text);
  }
  /** A template build's output (`log` events), coalesced as a run's output is. */
  log(text: string): void {
    this.#output('log', text);
  }

  #output(type: 'stdout' | 'stderr' | 'log', text: string): void {
    if (this.#pending && this.#pending.type !== type) this.#flushOutput();
    if (this.#pending) this.#pending.text += text;
    else this.#pending = { type, text };
    if (this.#pending.text.length >= (this.#opts.maxChunk ?? 16_384)) this.#flushOutput();
    else this.#timer ??= setTimeout(() => this.#flushOutput(), this.#opts.lingerMs ?? 20);
  }

  #flushOutput(): void {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    const p = this.#pending;
    this.#pending = null;
    if (p) this.#write(p.type, JSON.stringify({ text: p.text }));
  }

  #append(type: string, data: unknown): void {
    this.#flushOutput();
    this.#write(type, JSON.stringify(data));
  }

  #write(type: string, data: string): void {
    this.#unsent.push(type, data);
    if (this.#sendScheduled) return;
    this.#sendScheduled = true;
    setImmediate(() => this.#send());
  }

  #send(): void {
    this.#sendScheduled = false;
    if (this.#unsent.length === 0) return;
    const batch = this.#unsent;
    this.#unsent = [];
    // ioredis sends commands of one connection in order, so no need to wait between them.
    const w = this.#redis.sgAppendEvents(this.#key, ...batch).catch((err: unknown) => {
      this.#failed ??= err;
    });
    this.#writes = Promise.all([this.#writes, w]);
  }

  /**
   * Takes the events not sent yet (output still lingering included), as type, data pairs, for
   * ExecutionStore.finalize to write in the same step as the result. Send it on this writer's connection,
   * after what this writer already sent.
   */
  takePending(): string[] {
    this.#flushOutput();
    const batch = this.#unsent;
    this.#unsent = [];
    return batch;
  }

  /** Writes everything still pending; rejects if any write failed. */
  async flush(): Promise<void> {
    this.#flushOutput();
    this.#send();
    await this.#writes;
    if (this.#failed) throw this.#failed;
  }
}
