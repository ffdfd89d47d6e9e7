import type { Redis } from 'ioredis';
import { parseEnding, type Ending } from './executions.ts';
import type { Keys } from './keys.ts';
import { randomHex } from './random-ids.ts';

/** What waiting for one run's ending gives: the ending, `missed` or `timeout`. */
export type Notice = Ending | 'missed' | 'timeout';

export interface NoticeWait {
  /**
   * The run's ending, once it is published; `missed` when notices may have been lost meanwhile (the connection
   * was down: read the run, then wait again if it has not ended); `timeout` at `deadline` (ms since the epoch).
   */
  next(deadline: number): Promise<Notice>;
  /** Stops listening for this run. */
  cancel(): void;
}

interface Waiter {
  ending: Ending | null;
  missed: boolean;
  wake: (() => void) | null;
}

/**
 * Tells this process when a run it waits for ends, without a Redis command per wait: the process listens on a
 * channel of its own, ExecutionStore.start stores that channel on the run, and finalisation publishes the ending
 * there. Pub/sub drops what is published while the connection is down, so after a reconnect every waiter is told
 * it may have missed its notice.
 */
export class EndedNotices {
  readonly channel: string;
  readonly #waiters = new Map<string, Waiter>();
  /** Session operations waited for: their answer (JSON) once published; `missed` after a reconnect. */
  readonly #ops = new Map<string, { answer: string | null; missed: boolean; wake: (() => void) | null }>();
  #listening = false;

  /** `sub` becomes a subscriber connection: give it nothing else to do. */
  readonly #sub: Redis;
  constructor(sub: Redis, k: Keys) {
    this.#sub = sub;
    this.channel = k.endedChannel(randomHex(8));
    sub.on('message', (_channel: string, message: string) => this.#deliver(message));
    // ioredis subscribes again after a reconnect; once our own SUBSCRIBE is answered, nothing more can be lost.
    sub.on('ready', () => {
      if (!this.#listening) return;
      sub.subscribe(this.channel).then(
        () => this.#missedAll(),
        () => this.#missedAll(),
      );
    });
  }

  async listen(): Promise<void> {
    await this.#sub.subscribe(this.channel);
    this.#listening = true;
  }

  /** Starts listening for the ending of run `id`: before the run can end, so its notice cannot come first. */
  expect(id: string): NoticeWait {
    const w: Waiter = { ending: null, missed: false, wake: null };
    this.#waiters.set(id, w);
    return {
      next: (deadline) =>
        new Promise<Notice>((resolve) => {
          // eslint-disable-next-line prefer-const -- settle() may run (and read it) before it is set
          let timer: NodeJS.Timeout | undefined;
          const settle = () => {
            clearTimeout(timer);
            w.wake = null;
            if (w.ending) resolve(w.ending);
            else if (w.missed) {
              w.missed = false;
              resolve('missed');
            } else resolve('timeout');
          };
          if (w.ending || w.missed) {
            settle();
            return;
          }
          timer = setTimeout(settle, Math.max(0, deadline - Date.now()));
          w.wake = settle;
        }),
      cancel: () => {
        this.#waiters.delete(id);
      },
    };
  }

  /**
   * Starts listening for the answer of session operation `id` (published by the worker that does it as
   * `<id>\n<answer JSON>` on this process's channel): the answer, `missed` (read it from Redis), or `timeout`.
   */
  expectOp(id: string): { next(deadline: number): Promise<string | 'missed' | 'timeout'>; cancel(): void } {
    const w = { answer: null as string | null, missed: false, wake: null as (() => void) | null };
    this.#ops.set(id, w);
    return {
      next: (deadline) =>
        new Promise((resolve) => {
          const settle = (): void => {
            clearTimeout(timer);
            w.wake = null;
            if (w.answer !== null) resolve(w.answer);
            else if (w.missed) {
              w.missed = false;
              resolve('missed');
            } else resolve('timeout');
          };
          const timer = setTimeout(settle, Math.max(0, deadline - Date.now()));
          if (w.answer !== null || w.missed) settle();
          else w.wake = settle;
        }),
      cancel: () => {
        this.#ops.delete(id);
      },
    };
  }

  /** A notice is `<id>\n<started_at or empty>\n<finished_at>\n<result event JSON>` (sgFinalize). */
  #deliver(message: string): void {
    const a = message.indexOf('\n');
    const op = this.#ops.get(message.slice(0, a));
    if (op !== undefined) {
      op.answer = message.slice(a + 1);
      op.wake?.();
      return;
    }
    const b = message.indexOf('\n', a + 1);
    const c = message.indexOf('\n', b + 1);
    const w = this.#waiters.get(message.slice(0, a));
    if (!w || c < 0) return;
    w.ending = parseEnding(message.slice(c + 1), message.slice(a + 1, b), message.slice(b + 1, c));
    w.wake?.();
  }

  #missedAll(): void {
    for (const w of [...this.#waiters.values(), ...this.#ops.values()]) {
      w.missed = true;
      w.wake?.();
    }
  }

  close(): void {
    this.#sub.disconnect();
  }
}
