import type { ExecutionStore } from '@sandgate/state';

export interface LeaseKeeperOptions {
  executions: ExecutionStore;
  /** The worker whose leases these are. */
  workerId: string;
  /** SANDGATE_LEASE_MS: a lease is renewed every third of it. */
  leaseMs: number;
}

interface Held {
  log: { warn(obj: object, msg: string): void };
}

/**
 * Renews the leases of the runs a worker holds, every third of a lease, from one timer (as BullMQ's LockManager
 * extends its jobs' locks). A run's lease lets any other worker end it as `worker_lost` once this worker stops
 * renewing it: renewals that fail (Redis away) are logged and tried again at the next tick.
 */
export class LeaseKeeper {
  readonly #held = new Map<string, Held>();
  #timer: NodeJS.Timeout | undefined;

  readonly #o: LeaseKeeperOptions;
  constructor(o: LeaseKeeperOptions) {
    this.#o = o;
  }

  start(): void {
    this.#timer ??= setInterval(() => this.#renew(), Math.floor(this.#o.leaseMs / 3));
  }

  /** Keeps renewing the run's lease until `untrack`; a failed renewal is told to the run's own `log`. */
  track(executionId: string, log: Held['log']): void {
    this.#held.set(executionId, { log });
  }

  untrack(executionId: string): void {
    this.#held.delete(executionId);
  }

  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#held.clear();
  }

  #renew(): void {
    for (const [executionId, { log }] of this.#held) {
      this.#o.executions
        .renewLease(executionId, this.#o.workerId, this.#o.leaseMs)
        .catch((err: unknown) => log.warn({ err }, 'lease renewal failed'));
    }
  }
}
