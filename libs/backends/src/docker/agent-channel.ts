import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type Dockerode from 'dockerode';
import {
  encodeMessage,
  FrameDecoder,
  INTERRUPT,
  type AgentFrame,
  type ExitFrame,
  type RunRequest,
} from '../shared/agent-frames.ts';
import { timerDelay } from '../shared/timers.ts';
import { AttachDemuxer } from './attach-demux.ts';

export interface RunHandlers {
  /** The agent took the run (the 'running' phase). */
  onStarted(): void;
  stdout(bytes: Buffer): void;
  stderr(bytes: Buffer): void;
}

export interface RunControl {
  timeoutMs: number;
  signal: AbortSignal;
  /** How long an interrupted run may take to end before `kill`; 0 kills at once. */
  interruptGraceMs: number;
  /** Kills the sandbox (its attach stream then ends). */
  kill(): Promise<void>;
}

export interface AgentRunEnd {
  /** The agent took the run: the code may have run. False: it surely did not. */
  started: boolean;
  /** The run's exit frame; undefined when the stream ended first (the agent died or was killed). */
  exit: ExitFrame | undefined;
  timedOut: boolean;
  cancelled: boolean;
  /** We killed the sandbox because the interrupt did not end the run in time (or no grace was given). */
  killed: boolean;
  /** From `started` to the end; 0 when it never started. */
  durationMs: number;
}

interface Listener {
  frame(frame: AgentFrame): void;
  closed(): void;
}

const MAX_DIAGNOSTICS = 2048;

/** One attach to a sandbox running the agent: requests go to its stdin, frames come from its stdout. */
export class AgentChannel {
  readonly #stream: Duplex;
  #closed = false;
  #listener: Listener | undefined;
  #diagnostics = '';
  #onEnded: () => void = () => {};
  /** Resolves once the stream has ended. */
  readonly ended: Promise<void> = new Promise((resolve) => {
    this.#onEnded = resolve;
  });

  /** Attaches before anything is sent: frames written while nobody is attached are lost. */
  static async attach(container: Dockerode.Container): Promise<AgentChannel> {
    const stream = await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true });
    return new AgentChannel(stream as unknown as Duplex);
  }

  private constructor(stream: Duplex) {
    this.#stream = stream;
    const decoder = new FrameDecoder((frame) => this.#listener?.frame(frame));
    const demux = new AttachDemuxer(
      (bytes) => decoder.push(bytes),
      (bytes) => this.#keep(bytes),
    );
    stream.on('data', (chunk: Buffer) => demux.push(chunk));
    const closed = (): void => {
      if (this.#closed) return;
      this.#closed = true;
      this.#onEnded();
      this.#listener?.closed();
    };
    stream.once('end', closed);
    stream.once('close', closed);
    stream.on('error', closed);
  }

  /** The stream has ended: the sandbox stopped, or we detached. */
  get closed(): boolean {
    return this.#closed;
  }

  /** The last bytes the agent itself wrote to stderr (start-up failures), for messages and logs. */
  get diagnostics(): string {
    return this.#diagnostics;
  }

  /**
   * Resolves once the agent has answered a ping on this attach. Docker answers an attach a moment before it relays
   * the container's output to it, so a frame written in between is lost to us: pings are repeated, at growing
   * intervals, until one is answered. Sent before the agent runs (a new sandbox), they wait in its stdin. Rejects
   * when the sandbox ends or `timeoutMs` passes first.
   */
  handshake(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const sent = new Set<string>();
      let interval = 25;
      let resend: NodeJS.Timeout | undefined;
      const ping = (): void => {
        const id = randomBytes(6).toString('hex');
        sent.add(id);
        this.#send(encodeMessage({ op: 'ping', id }));
        resend = setTimeout(ping, interval);
        interval = Math.min(interval * 2, 1000);
      };
      const done = (err?: Error): void => {
        clearTimeout(deadline);
        clearTimeout(resend);
        this.#listener = undefined;
        if (err) reject(err);
        else resolve();
      };
      const deadline = setTimeout(
        () => done(new Error(`the sandbox agent did not answer within ${timeoutMs} ms`)),
        timerDelay(timeoutMs),
      );
      this.#listener = {
        frame: (frame) => {
          if (frame.t === 'pong' && frame.id !== null && sent.has(frame.id)) done();
        },
        closed: () => done(new Error(`the sandbox agent ended: ${this.#diagnostics.trim() || 'no output'}`)),
      };
      if (this.#closed) return this.#listener.closed();
      ping();
    });
  }

  /**
   * Sends one run and follows it to its exit frame, or to the end of the stream. On timeout or abort it asks the
   * agent to interrupt the run, and kills the sandbox if that has not ended it within the grace period.
   */
  run(request: RunRequest, handlers: RunHandlers, ctl: RunControl): Promise<AgentRunEnd> {
    return new Promise((resolve) => {
      let startedAt: number | undefined;
      let stopped: 'timeout' | 'cancelled' | undefined;
      let killed = false;
      let grace: NodeJS.Timeout | undefined;
      const finish = (exit: ExitFrame | undefined): void => {
        clearTimeout(timer);
        clearTimeout(grace);
        ctl.signal.removeEventListener('abort', onAbort);
        this.#listener = undefined;
        const durationMs = startedAt === undefined ? 0 : performance.now() - startedAt;
        resolve({
          started: startedAt !== undefined,
          exit,
          timedOut: stopped === 'timeout',
          cancelled: stopped === 'cancelled',
          killed,
          durationMs,
        });
      };
      const kill = (): void => {
        killed = true;
        // Detaching ends the run for us even if the engine cannot kill (it is then gone, or unreachable).
        void ctl
          .kill()
          .catch(() => {})
          .finally(() => this.close());
      };
      const stop = (why: 'timeout' | 'cancelled'): void => {
        if (stopped !== undefined) return;
        stopped = why;
        if (ctl.interruptGraceMs <= 0) return kill();
        this.#send(encodeMessage(INTERRUPT));
        grace = setTimeout(kill, timerDelay(ctl.interruptGraceMs));
      };
      const onAbort = (): void => stop('cancelled');
      this.#listener = {
        frame: (frame) => {
          // Frames before our `started` belong to an earlier run (a worker that died mid-run left it going).
          if (frame.t === 'started' && frame.id === request.id && startedAt === undefined) {
            startedAt = performance.now();
            handlers.onStarted();
          } else if (startedAt === undefined) {
            return;
          } else if (frame.t === 'out') {
            handlers.stdout(Buffer.from(frame.d, 'latin1'));
          } else if (frame.t === 'err') {
            handlers.stderr(Buffer.from(frame.d, 'latin1'));
          } else if (frame.t === 'exit' && frame.id === request.id) {
            finish(frame);
          }
        },
        closed: () => finish(undefined),
      };
      const timer = setTimeout(() => stop('timeout'), timerDelay(ctl.timeoutMs));
      ctl.signal.addEventListener('abort', onAbort, { once: true });
      if (this.#closed) return this.#listener.closed();
      this.#send(encodeMessage(request));
      if (ctl.signal.aborted) onAbort();
    });
  }

  /**
   * Asks the agent to reset the sandbox between two runs (see Reset), and resolves once it says it has. Rejects when
   * it reports a failure, the stream ends, or `timeoutMs` passes: the sandbox is then in no known state.
   */
  reset(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const id = randomBytes(6).toString('hex');
      const done = (err?: Error): void => {
        clearTimeout(deadline);
        this.#listener = undefined;
        if (err) reject(err);
        else resolve();
      };
      const deadline = setTimeout(
        () => done(new Error(`the sandbox agent did not finish its reset within ${timeoutMs} ms`)),
        timerDelay(timeoutMs),
      );
      this.#listener = {
        frame: (frame) => {
          if (frame.t !== 'reset' || frame.id !== id) return;
          done(frame.ok ? undefined : new Error(`the sandbox reset failed: ${frame.error ?? 'no reason given'}`));
        },
        closed: () => done(new Error('the sandbox ended during its reset')),
      };
      if (this.#closed) return this.#listener.closed();
      this.#send(encodeMessage({ op: 'reset', id }));
    });
  }

  /** Detaches. The sandbox lives on (its stdin stays open: StdinOnce is false). */
  close(): void {
    this.#stream.destroy();
  }

  #send(line: string): void {
    if (!this.#closed) this.#stream.write(line);
  }

  #keep(bytes: Buffer): void {
    this.#diagnostics = (this.#diagnostics + bytes.toString('utf8')).slice(-MAX_DIAGNOSTICS);
  }
}
