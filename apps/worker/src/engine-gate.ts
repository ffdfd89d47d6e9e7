import { WORKER_ALIVE_MS, type WorkerRegistry } from '@sandgate/state';

export interface EngineGateOptions {
  /** This worker's id in the registry. */
  id: string;
  registry: Pick<WorkerRegistry, 'list'>;
  /** The queue worker whose taking of runs the gate pauses and resumes (BullMQ's Worker). */
  queue: { pause(): Promise<void>; resume(): Promise<void>; isPaused(): boolean };
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  /** Told when it starts or stops taking runs (the worker stamps its heartbeat, so the stats show it at once). */
  onChange(): Promise<void>;
}

/**
 * Whether this worker takes runs, from what its backend probe found. A worker whose engine is gone would take runs
 * and fail each at once (`backend_unavailable`) while another worker could run them: it stops taking runs while its
 * engine does not answer and another live worker's does, and takes them again as soon as its engine answers. A
 * worker with no usable peer keeps taking runs and fails them clearly, rather than leave them queued without end.
 */
export class EngineGate {
  #following: Promise<void> = Promise.resolve();
  #taking = true;

  readonly #o: EngineGateOptions;
  constructor(o: EngineGateOptions) {
    this.#o = o;
  }

  /** Whether this worker takes runs now. */
  get takingRuns(): boolean {
    return this.#taking;
  }

  /** Called after each probe of the backend (every heartbeat); one decision at a time, in order. */
  follow(usable: boolean): Promise<void> {
    this.#following = this.#following
      .then(() => this.#decide(usable))
      .catch((err: unknown) => {
        this.#o.log.warn({ err }, 'could not decide whether to take runs');
      });
    return this.#following;
  }

  async #decide(usable: boolean): Promise<void> {
    const before = this.#taking;
    await this.#settle(usable);
    if (before !== this.#taking) await this.#o.onChange();
  }

  async #settle(usable: boolean): Promise<void> {
    const { queue, log } = this.#o;
    if (usable) {
      if (!queue.isPaused()) return;
      await queue.resume();
      this.#taking = true;
      log.info({}, 'backend usable again: taking runs');
      return;
    }
    const peers = (await this.#o.registry.list(WORKER_ALIVE_MS)).filter(
      (w) => w.id !== this.#o.id && w.backend_state === 'usable',
    ).length;
    if (peers > 0 && !queue.isPaused()) {
      // No new run is taken, not even by the fetch waiting now (BullMQ cuts its blocking read); this resolves once the
      // runs in flight have ended, as the engine lets them (without an engine, at once).
      await queue.pause();
      this.#taking = false;
      log.warn({ usable_peers: peers }, 'backend unusable: not taking runs while other workers can run them');
    } else if (peers === 0 && queue.isPaused()) {
      await queue.resume();
      this.#taking = true;
      log.warn({}, 'backend unusable and no other worker can run sandboxes: taking runs (they fail at once)');
    }
  }
}
