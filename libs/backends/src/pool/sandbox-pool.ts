import type { AgentChannel } from '../agent/agent-channel.ts';
import type { BackendLogger } from '../logger.ts';

/** A started sandbox whose agent has answered, waiting for a run (a Docker container, a Kubernetes Pod). */
export interface PoolMember {
  readonly name: string;
  readonly channel: AgentChannel;
  /** Runs it has taken. */
  runs: number;
  /** The tenant of its runs, once it has had one: it never serves another. */
  tenant: string | undefined;
}

export interface PoolStats {
  /** One-shot runs that got a warm sandbox. */
  hits: number;
  /** ... of which got one that had served an earlier run of the same tenant and was reset since. */
  reused: number;
  /** One-shot runs that went cold: pool empty, disabled, or the warm sandbox could not be used. */
  misses: number;
  /** Sandboxes given up after a run because their reset failed or took too long. */
  resetFailed: number;
  /** Fresh sandboxes the pool keeps ready. */
  size: number;
  ready: number;
  starting: number;
  /** Reset sandboxes waiting for another run of their tenant. */
  recycled: number;
}

/** A pool's figures as a backend reports them (BackendStats.pool). */
export function poolFigures(s: PoolStats): {
  hits: number;
  reused: number;
  misses: number;
  reset_failed: number;
  ready: number;
} {
  return { hits: s.hits, reused: s.reused, misses: s.misses, reset_failed: s.resetFailed, ready: s.ready };
}

export interface SandboxPoolOptions<T extends PoolMember> {
  size: number;
  log: BackendLogger;
  /** Runs one sandbox may serve, with a reset between two; 1 makes every sandbox single-use. */
  maxRuns: number;
  /** Reset sandboxes kept for their tenant's next run (the runs in flight at once is a good bound); 0 keeps none. */
  maxRecycled: number;
  /** How long a reset sandbox waits for its tenant's next run before it is removed. */
  recycledIdleMs: number;
  /**
   * Makes a sandbox, started and answering; undefined when the pool closed meanwhile (it then removed it itself).
   * Rejects when it cannot, having removed what it made.
   */
  make(closed: () => boolean, limits?: { memory_mb: number; cpus: number }): Promise<T | undefined>;
  /** Removes a sandbox (taken or not), and whatever it holds. */
  discard(sandbox: T): Promise<void>;
}

const MAX_BACKOFF_MS = 30_000;

interface Recycled<T> {
  sandbox: T;
  expiry: NodeJS.Timeout;
}

/**
 * Keeps `size` fresh sandboxes started and ready, refilling one at a time in the background (so refills compete as
 * little as possible with the runs they serve). A sandbox whose run ended cleanly and whose agent then proved a
 * reset (see sandgate_reset.py) comes back through `recycle`, for the next run of the same tenant only, up to
 * `maxRuns` runs; any other is removed by `release`. Reuse is what lets a burst of one-shots go faster than the
 * engine can start sandboxes. What a sandbox is, and how it is made and removed, is the backend's (make, discard).
 */
export class SandboxPool<T extends PoolMember> {
  readonly #o: SandboxPoolOptions<T>;
  readonly #idle: T[] = [];
  // Oldest first.
  readonly #recycled: Recycled<T>[] = [];
  readonly #tasks = new Set<Promise<unknown>>();
  #readyWaiters: (() => void)[] = [];
  #starting = 0;
  #hits = 0;
  #reused = 0;
  #misses = 0;
  #resetFailed = 0;
  #failures = 0;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;
  #disabled = false;

  constructor(options: SandboxPoolOptions<T>) {
    this.#o = options;
    this.#fill();
  }
  /**
   * A ready sandbox for a run of `tenant`: the one of its own it used last, else a fresh one; undefined (a miss)
   * when there is neither.
   */
  take(tenant: string): T | undefined {
    const taken = this.#takeRecycled(tenant) ?? this.#takeFresh();
    if (taken === undefined) this.#misses++;
    else this.#hits++;
    // No refill here: it would compete for the CPU with the very run it serves. recycle() or release() refill.
    return taken;
  }

  /**
   * A sandbox made now for one run, not taken from those ready (a run that must have an agent — its code calls tools —
   * when none is ready). It goes back through recycle() or release() like any other.
   */
  async makeFresh(limits?: { memory_mb: number; cpus: number }): Promise<T> {
    const sandbox = await this.#o.make(() => this.#closed, limits);
    if (sandbox === undefined) throw new Error('the pool is closing');
    return sandbox;
  }

  /** Whether a sandbox that has just served a run may serve another, after a reset. */
  reusable(sandbox: T): boolean {
    return (
      sandbox.runs < this.#o.maxRuns &&
      this.#o.maxRecycled > 0 &&
      !this.#closed &&
      !this.#disabled &&
      !sandbox.channel.closed
    );
  }

  /**
   * Takes back a sandbox that was reset after its run, for the next run of the same tenant; the longest unused
   * one is removed past `maxRecycled`.
   */
  recycle(sandbox: T): void {
    if (!this.reusable(sandbox)) return this.release(sandbox);
    const expiry = setTimeout(() => this.#expire(sandbox), this.#o.recycledIdleMs);
    expiry.unref();
    this.#recycled.push({ sandbox, expiry });
    while (this.#recycled.length > this.#o.maxRecycled) this.#expire(this.#recycled[0]!.sandbox);
    this.#fill();
  }

  /** A sandbox's reset after its run failed: it is removed, and counted. */
  recordResetFailure(): void {
    this.#resetFailed++;
  }

  /** A taken sandbox turned out unusable and the run went cold: it counts as a miss. */
  recordFallback(): void {
    this.#hits--;
    this.#misses++;
  }

  /** Removes a sandbox (taken or not), in the background; close() waits for it. */
  release(sandbox: T): void {
    sandbox.channel.close();
    this.#discard(sandbox);
  }

  /** Stops refilling for good, e.g. when slot directories cannot be renamed into sessions. */
  disable(reason: string): void {
    if (this.#disabled) return;
    this.#disabled = true;
    this.#o.log.error({ reason }, 'warm pool disabled; one-shot runs go cold');
    this.#drain();
  }

  stats(): PoolStats {
    return {
      hits: this.#hits,
      reused: this.#reused,
      misses: this.#misses,
      resetFailed: this.#resetFailed,
      size: this.#o.size,
      ready: this.#idle.length,
      starting: this.#starting,
      recycled: this.#recycled.length,
    };
  }

  /** Resolves once `size` sandboxes are ready (at once for size 0), or the pool is closed or disabled. */
  whenReady(): Promise<void> {
    if (this.#satisfied()) return Promise.resolve();
    return new Promise((resolve) => this.#readyWaiters.push(resolve));
  }

  /** Resolves once the pool is ready and no refill or removal is in flight: nothing of it competes for the CPU. */
  async whenSettled(): Promise<void> {
    for (;;) {
      await this.whenReady();
      if (this.#tasks.size === 0) return;
      await Promise.allSettled([...this.#tasks]);
    }
  }

  /** Stops refilling, removes every sandbox not handed out, and waits for every removal. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    this.#drain();
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
  }

  #fill(): void {
    if (this.#closed || this.#disabled || this.#retry !== undefined || this.#starting > 0) return;
    if (this.#idle.length >= this.#o.size) return;
    this.#starting++;
    this.#track(
      this.#create().then(
        () => {
          this.#failures = 0;
          this.#starting--;
          this.#notify();
          this.#fill();
        },
        (err: unknown) => {
          this.#starting--;
          this.#failures++;
          const backoff = Math.min(MAX_BACKOFF_MS, 250 * 2 ** this.#failures);
          this.#o.log.warn({ err, retryInMs: backoff }, 'could not start a pooled sandbox');
          this.#retry = setTimeout(() => {
            this.#retry = undefined;
            this.#fill();
          }, backoff);
          this.#retry.unref();
        },
      ),
    );
  }

  async #create(): Promise<void> {
    const sandbox = await this.#o.make(() => this.#closed);
    if (sandbox === undefined) return;
    if (this.#closed || this.#disabled) return this.release(sandbox);
    this.#idle.push(sandbox);
    void sandbox.channel.ended.then(() => this.#lost(sandbox));
  }

  /** An idle sandbox whose stream ended (killed from outside, or its agent died) is removed, and replaced if fresh. */
  #lost(sandbox: T): void {
    const at = this.#idle.indexOf(sandbox);
    if (at < 0) return this.#expire(sandbox);
    this.#idle.splice(at, 1);
    this.release(sandbox);
    this.#fill();
  }

  #takeFresh(): T | undefined {
    let taken = this.#idle.shift();
    while (taken !== undefined && taken.channel.closed) {
      this.release(taken);
      taken = this.#idle.shift();
    }
    return taken;
  }

  #takeRecycled(tenant: string): T | undefined {
    for (let i = this.#recycled.length - 1; i >= 0; i--) {
      const { sandbox, expiry } = this.#recycled[i]!;
      if (sandbox.tenant !== tenant) continue;
      this.#recycled.splice(i, 1);
      clearTimeout(expiry);
      if (sandbox.channel.closed) {
        this.release(sandbox);
        continue;
      }
      this.#reused++;
      return sandbox;
    }
    return undefined;
  }

  #expire(sandbox: T): void {
    const at = this.#recycled.findIndex((r) => r.sandbox === sandbox);
    if (at < 0) return;
    clearTimeout(this.#recycled[at]!.expiry);
    this.#recycled.splice(at, 1);
    this.release(sandbox);
  }

  #drain(): void {
    for (const sandbox of this.#idle.splice(0)) this.release(sandbox);
    for (const { sandbox } of [...this.#recycled]) this.#expire(sandbox);
    this.#notify();
  }

  #satisfied(): boolean {
    return this.#closed || this.#disabled || this.#idle.length >= this.#o.size;
  }

  #notify(): void {
    if (!this.#satisfied()) return;
    for (const resolve of this.#readyWaiters.splice(0)) resolve();
  }

  /** Removes a sandbox, then refills: one piece of background work after another, never both at once. */
  #discard(sandbox: T): void {
    this.#track(
      (async () => {
        await this.#o
          .discard(sandbox)
          .catch((err: unknown) =>
            this.#o.log.warn({ sandbox: sandbox.name, err }, 'could not remove a pooled sandbox; sweep will retry'),
          );
        this.#fill();
      })(),
    );
  }

  #track(task: Promise<unknown>): void {
    this.#tasks.add(task);
    void task.finally(() => this.#tasks.delete(task)).catch(() => {});
  }
}
