import type { Writable } from 'node:stream';
import type Dockerode from 'dockerode';
import type { RunEnd } from '../outcome/result.ts';
import { timerDelay } from '../run/timers.ts';
import { ENGINE_STOPPED, stoppedByEngine } from './engine-stops.ts';

export interface RunIo {
  stdout: Writable;
  stderr: Writable;
  /** Written to the program's standard input, then closed; null when the container has no stdin. */
  stdin: string | null;
}

export interface RunControl {
  timeoutMs: number;
  signal: AbortSignal;
  /** Called once the program is running (the 'running' phase). */
  onStarted(): void;
}

export interface ContainerRun extends RunEnd {
  /** False when the run was cancelled before the program started. */
  started: boolean;
  /** Wall time from start to exit; 0 when it never started. */
  durationMs: number;
}

type KillReason = 'timeout' | 'cancelled';

/**
 * Runs a created container to its exit, feeding its output to `io` and killing it on timeout or abort.
 * The order matters: attach and wait (for the next exit) are registered before start, or a fast program's output
 * and exit are missed.
 */
export async function runContainer(container: Dockerode.Container, io: RunIo, ctl: RunControl): Promise<ContainerRun> {
  const withStdin = io.stdin !== null;
  // hijack gives a duplex socket; without stdin the plain response stream is enough.
  const stream = await container.attach({
    stream: true,
    stdout: true,
    stderr: true,
    stdin: withStdin,
    hijack: withStdin,
  });
  const drained = endOf(stream);
  container.modem.demuxStream(stream, io.stdout, io.stderr);
  const exited: Promise<unknown> = container.wait({ condition: 'next-exit' });
  exited.catch(() => {}); // observed in stoppedState; a run that never starts leaves it pending harmlessly
  if (ctl.signal.aborted) {
    destroy(stream);
    return { started: false, exitCode: -1, timedOut: false, oomKilled: false, cancelled: true, durationMs: 0 };
  }
  await container.start().catch((err: unknown) => {
    destroy(stream);
    throw err;
  });
  const startedAt = performance.now();
  const startedAtMs = Date.now();
  ctl.onStarted();
  const killer = new Killer(container);
  const timer = setTimeout(() => killer.kill('timeout'), timerDelay(ctl.timeoutMs));
  const onAbort = (): void => killer.kill('cancelled');
  ctl.signal.addEventListener('abort', onAbort, { once: true });
  if (ctl.signal.aborted) onAbort();
  try {
    if (io.stdin !== null) stream.end(io.stdin);
    await drained;
    const state = await stoppedState(container, exited);
    const durationMs = performance.now() - startedAt;
    const killedBy = await killer.settled();
    // Killed by a signal this run did not send: by the engine, or by the code itself?
    const engineStopped =
      killedBy === null &&
      !state.oomKilled &&
      (state.exitCode > 128 || state.exitCode === -1) &&
      (await stoppedByEngine(container, startedAtMs));
    return {
      started: true,
      ...state,
      timedOut: killedBy === 'timeout',
      cancelled: killedBy === 'cancelled',
      durationMs,
      ...(engineStopped ? { engineStopped: ENGINE_STOPPED } : {}),
    };
  } finally {
    clearTimeout(timer);
    ctl.signal.removeEventListener('abort', onAbort);
    destroy(stream);
  }
}

/** Kills once, and remembers why, unless the program had already exited on its own. */
class Killer {
  #reason: KillReason | null = null;
  #pending: Promise<void> = Promise.resolve();
  readonly #container: Dockerode.Container;
  constructor(container: Dockerode.Container) {
    this.#container = container;
  }

  kill(reason: KillReason): void {
    if (this.#reason !== null) return;
    this.#reason = reason;
    this.#pending = this.#container.kill({ signal: 'SIGKILL' }).then(
      () => {},
      (err: { statusCode?: number }) => {
        // 409 "is not running": the program exited on its own first, so its own exit stands.
        if (err.statusCode === 409) this.#reason = null;
      },
    );
  }

  async settled(): Promise<KillReason | null> {
    await this.#pending;
    return this.#reason;
  }
}

/**
 * The container's final state. The attach stream ends when the container's stdio closes, normally at exit;
 * if the program closed its stdio and lives on, the registered wait covers the rest.
 */
async function stoppedState(
  container: Dockerode.Container,
  exited: Promise<unknown>,
): Promise<{ exitCode: number; oomKilled: boolean }> {
  // An engine that went away with the container has no state to give: it stopped the run, not the code.
  let info = await container.inspect().catch(() => null);
  if (info === null) return { exitCode: -1, oomKilled: false };
  if (info.State.Running) {
    await exited;
    info = await container.inspect();
  }
  return { exitCode: info.State.ExitCode, oomKilled: info.State.OOMKilled };
}

/** Resolves when the stream is done for any reason; demuxStream never signals this itself. */
function endOf(stream: NodeJS.ReadableStream): Promise<void> {
  return new Promise((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', () => resolve());
  });
}

function destroy(stream: NodeJS.ReadableStream): void {
  (stream as unknown as { destroy?: () => void }).destroy?.();
}
