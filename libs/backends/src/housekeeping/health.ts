import type { BackendHealth } from '../backend.ts';

export interface HealthProbe {
  /** What answers the call, for the reason given on a timeout: `engine`, `API server`. */
  what: string;
  timeoutMs: number;
  /** One cheap call to the engine; `signal` aborts once `timeoutMs` has passed. */
  call: (signal: AbortSignal) => Promise<unknown>;
  /** The reason, for an operator, of a call that failed. */
  why: (err: unknown) => string;
}

/**
 * One cheap call to the engine as a health probe. The call's signal aborts after `timeoutMs`, so that the request
 * itself is dropped; the answer comes within `timeoutMs` even when the call ignores its signal, since a probe that
 * hangs would leave its worker reporting the previous answer forever. Never rejects: a failure is `usable: false`.
 */
export async function probeHealth({ what, timeoutMs, call, why }: HealthProbe): Promise<BackendHealth> {
  const ac = new AbortController();
  const silent: BackendHealth = { usable: false, reason: `${what} did not answer within ${timeoutMs} ms` };
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<BackendHealth>((resolve) => {
    timer = setTimeout(() => {
      ac.abort();
      resolve(silent);
    }, timeoutMs);
  });
  const answered = call(ac.signal).then(
    (): BackendHealth => ({ usable: true }),
    (err: unknown): BackendHealth => (ac.signal.aborted ? silent : { usable: false, reason: why(err) }),
  );
  try {
    return await Promise.race([answered, late]);
  } finally {
    clearTimeout(timer);
  }
}
