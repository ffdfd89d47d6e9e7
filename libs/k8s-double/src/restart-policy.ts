/**
 * Whether the kubelet runs a container again after it exited: never under restartPolicy Never; under OnFailure
 * after a non-zero exit; under Always after any exit, except an init container, which is done once it succeeds.
 */
export function restartsAfter(policy: string | undefined, init: boolean, exitCode: number): boolean {
  if (policy === 'Never') return false;
  return exitCode !== 0 || (policy !== 'OnFailure' && !init);
}

interface BackOffEntry {
  backOffMs: number;
  lastRestart: number;
}

/**
 * The kubelet's restart back-off per container (flowcontrol.Backoff): the first restart is at once, then the
 * container waits `initialMs` from its exit, doubling each time up to `maxMs` (10 s and 5 min on a node). A
 * container that stops more than twice the maximum after its last restart counts as stable and starts over.
 */
export class CrashBackOff {
  readonly #entries = new Map<string, BackOffEntry>();

  constructor(
    private readonly initialMs: number,
    private readonly maxMs: number,
  ) {}

  /** How much longer a container that stopped at `stoppedAt` waits before its restart; 0 to restart now. */
  remaining(key: string, stoppedAt: number, now = Date.now()): number {
    const entry = this.#entries.get(key);
    if (!entry || this.#stable(entry, stoppedAt)) return 0;
    return Math.max(0, entry.backOffMs - (now - stoppedAt));
  }

  /** The back-off in force for a container, as the kubelet's CrashLoopBackOff message names it. */
  current(key: string): number {
    return this.#entries.get(key)?.backOffMs ?? 0;
  }

  /** Records a restart now of a container that stopped at `stoppedAt`: the next back-off doubles. */
  next(key: string, stoppedAt: number, now = Date.now()): void {
    const entry = this.#entries.get(key);
    const backOffMs =
      !entry || this.#stable(entry, stoppedAt) ? this.initialMs : Math.min(entry.backOffMs * 2, this.maxMs);
    this.#entries.set(key, { backOffMs, lastRestart: now });
  }

  #stable(entry: BackOffEntry, stoppedAt: number): boolean {
    return stoppedAt - entry.lastRestart > 2 * this.maxMs;
  }
}

/** A duration as Go prints one (`10s`, `2m40s`, `5m0s`, `200ms`), the way the kubelet's messages show it. */
export function goDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const hours = Math.floor(ms / 3_600_000);
  const minutes = Math.floor((ms % 3_600_000) / 60_000);
  const seconds = `${(ms % 60_000) / 1000}s`;
  if (hours) return `${hours}h${minutes}m${seconds}`;
  return minutes ? `${minutes}m${seconds}` : seconds;
}
