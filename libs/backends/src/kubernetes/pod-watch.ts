import type * as k8s from '@kubernetes/client-node';
import type { BackendLogger } from '../logger.ts';
import { messageOf, statusOf, type PodApi } from './api.ts';

/** How long the server keeps one watch request open before the worker makes the next (from where it was). */
const WATCH_SECONDS = 290;
/** A watch that has said nothing (no event, no bookmark) for this long past its own end is given up and made again. */
const SILENT_MS = (WATCH_SECONDS + 60) * 1000;
const RETRY_MIN_MS = 200;
const RETRY_MAX_MS = 5_000;

/**
 * The worker's view of its deployment's Pods, kept by one list and then one watch (an informer): how its runs follow
 * their Pods without reading them again and again, and what its sweep looks through. Each change of a Pod wakes
 * who waits on it. Made again from a new list when the server says the watch's point in history is gone (410), and
 * retried with backoff when the API server does not answer; meanwhile `synced` is false and callers read the API.
 * Started by the first run or sweep that looks through it.
 */
export class PodWatch {
  readonly #pods = new Map<string, k8s.V1Pod>();
  readonly #waiters = new Map<string, Set<() => void>>();
  #resourceVersion: string | undefined;
  #synced = false;
  #closed = false;
  #request: AbortController | undefined;
  #silence: NodeJS.Timeout | undefined;
  #wake: (() => void) | undefined;
  readonly #stop = new AbortController();
  #running: Promise<void> | undefined;
  /** Lists made (the first, and each after a 410 or a failure), for the counts the docs give. */
  lists = 0;

  readonly #api: PodApi;
  readonly #log: BackendLogger;
  constructor(
    api: PodApi,
    readonly selector: string,
    log: BackendLogger,
  ) {
    this.#api = api;
    this.#log = log;
  }

  /** Starts it (once): a list, then the watch, in the background. */
  start(): this {
    if (!this.#closed) this.#running ??= this.#run();
    return this;
  }

  /** The view follows the API server: every change since the last list has been seen. */
  get synced(): boolean {
    return this.#synced;
  }

  get(name: string): k8s.V1Pod | undefined {
    return this.#pods.get(name);
  }

  list(): k8s.V1Pod[] {
    return [...this.#pods.values()];
  }

  /**
   * Resolves at the next change of Pod `name` (or of the whole view: a new list, a lost watch), after `ms`, or when
   * `signal` aborts, whichever comes first.
   */
  changed(name: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const set = this.#waiters.get(name) ?? new Set();
      this.#waiters.set(name, set);
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      set.add(done);
      const waiters = this.#waiters;
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        set.delete(done);
        if (set.size === 0 && waiters.get(name) === set) waiters.delete(name);
        resolve();
      }
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#unsync();
    this.#stop.abort();
    this.#request?.abort();
    this.#wake?.();
    await this.#running;
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#closed) {
      try {
        if (this.#resourceVersion === undefined) await this.#list();
        if (this.#closed) return;
        await this.#watch(this.#resourceVersion!);
        failures = 0;
      } catch (err) {
        this.#unsync();
        if (this.#closed) return;
        if (statusOf(err) === 410 || (err as { statusCode?: number }).statusCode === 410) {
          this.#resourceVersion = undefined;
          continue;
        }
        failures++;
        if (failures === 1 || failures % 10 === 0) {
          this.#log.warn({ err: messageOf(err), failures }, 'watch of the sandbox Pods failed; retrying');
        }
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
          setTimeout(resolve, Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** (failures - 1)));
        });
      }
    }
  }

  /** Every Pod of the selector now, and the point in history the watch goes on from. */
  async #list(): Promise<void> {
    this.lists++;
    const seen = new Map<string, k8s.V1Pod>();
    let next: string | undefined;
    let version: string | undefined;
    do {
      const page = await this.#api.listPods(this.selector, next, this.#stop.signal);
      version ??= page.metadata?.resourceVersion;
      for (const pod of page.items) seen.set(pod.metadata!.name!, pod);
      next = page.metadata?._continue || undefined;
    } while (next !== undefined);
    this.#pods.clear();
    for (const [name, pod] of seen) this.#pods.set(name, pod);
    this.#resourceVersion = version;
    this.#notifyAll();
  }

  /** One watch request, until the server ends it (resolves) or it fails (rejects; a 410 with its status). */
  #watch(from: string): Promise<void> {
    return new Promise((resolve, reject) => {
      let ended = false;
      const end = (err?: unknown) => {
        if (ended) return;
        ended = true;
        clearTimeout(this.#silence);
        this.#request = undefined;
        if (err === undefined || this.#closed) resolve();
        else reject(err);
      };
      const heard = () => {
        clearTimeout(this.#silence);
        this.#silence = setTimeout(() => {
          this.#log.warn({}, 'the watch of the sandbox Pods went silent; making it again');
          this.#request?.abort();
          end();
        }, SILENT_MS);
      };
      this.#api
        .watchPods(this.selector, from, WATCH_SECONDS, {
          event: (type, object) => {
            heard();
            if (type === 'ERROR') {
              const status = object as k8s.V1Status;
              this.#request?.abort();
              end(Object.assign(new Error(status.message ?? 'watch error'), { code: status.code }));
              return;
            }
            const pod = object as k8s.V1Pod;
            const version = pod.metadata?.resourceVersion;
            if (type === 'BOOKMARK') {
              if (version) this.#resourceVersion = version;
              return;
            }
            const name = pod.metadata?.name;
            if (name === undefined) return;
            if (type === 'DELETED') this.#pods.delete(name);
            else this.#pods.set(name, pod);
            if (version) this.#resourceVersion = version;
            this.#notify(name);
          },
          done: (err) => end(err),
        })
        .then((request) => {
          if (ended) return;
          this.#request = request;
          this.#synced = true;
          heard();
          // Anyone who looked while it was down looks again now.
          this.#notifyAll();
        }, end);
    });
  }

  #unsync(): void {
    if (!this.#synced) return;
    this.#synced = false;
    this.#notifyAll();
  }

  #notify(name: string): void {
    for (const done of [...(this.#waiters.get(name) ?? [])]) done();
  }

  #notifyAll(): void {
    for (const set of [...this.#waiters.values()]) for (const done of [...set]) done();
  }
}
