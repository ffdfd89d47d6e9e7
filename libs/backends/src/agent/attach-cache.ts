import type { AgentChannel } from './agent-channel.ts';

/** What is kept: the attach, and whatever else its user wants back with it. */
export interface Attached {
  channel: AgentChannel;
  /** A second connection of the same sandbox (a session Pod's volumes container), closed with the first. */
  volumes?: AgentChannel | undefined;
}

interface Entry<K extends Attached> {
  kept: K;
  idle: NodeJS.Timeout;
}

/**
 * Attaches to session sandboxes kept open between runs, so the next run of a session on this worker costs neither
 * an attach nor a handshake. Bounded in number and in idle time: each one holds a connection to the engine.
 */
export class AttachCache<K extends Attached> {
  readonly #entries = new Map<string, Entry<K>>();
  readonly #max: number;
  readonly #idleMs: number;

  constructor(max = 32, idleMs = 5 * 60_000) {
    this.#max = max;
    this.#idleMs = idleMs;
  }

  /** The open attach kept for `key`, now the caller's to use and to give back with put(). */
  take(key: string): K | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    clearTimeout(entry.idle);
    if (entry.kept.channel.closed) {
      entry.kept.volumes?.close();
      return undefined;
    }
    return entry.kept;
  }

  /** Keeps an attach that has answered a handshake; the least recently used one goes past the bound. */
  put(key: string, kept: K): void {
    if (kept.channel.closed) {
      kept.volumes?.close();
      return;
    }
    this.#evict(key);
    const idle = setTimeout(() => this.#evict(key), this.#idleMs);
    idle.unref();
    this.#entries.set(key, { kept, idle });
    for (const oldest of this.#entries.keys()) {
      if (this.#entries.size <= this.#max) break;
      this.#evict(oldest);
    }
  }

  /** Closes every attach whose key is not in `keep`. */
  retain(keep: ReadonlySet<string>): void {
    for (const key of [...this.#entries.keys()]) if (!keep.has(key)) this.#evict(key);
  }

  get size(): number {
    return this.#entries.size;
  }

  close(): void {
    for (const key of [...this.#entries.keys()]) this.#evict(key);
  }

  #evict(key: string): void {
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    this.#entries.delete(key);
    clearTimeout(entry.idle);
    entry.kept.channel.close();
    entry.kept.volumes?.close();
  }
}
