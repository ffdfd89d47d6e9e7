import type { Socket } from 'node:net';
import type { RawData, WebSocket } from 'ws';
import { FRAME, FrameReader, MAX_FRAME, frame, resizeFrame } from './terminal-frames.ts';

/** How a terminal's websocket closes: its close code and reason (docs/terminal.md lists them). */
export interface TerminalClose {
  code: number;
  reason: string;
}

export const TERMINAL_CLOSE = {
  /** The shell exited; the reason says with which code. */
  exited: 1000,
  /** The gateway is shutting down: open the terminal again (on another replica). */
  goingAway: 1001,
  /** A text message that is not a control message this gateway knows. */
  invalidMessage: 1008,
  /** The sandbox's agent closed the connection without saying why. */
  agentLost: 1011,
  sessionDeleted: 4404,
  sessionPaused: 4409,
  /** The session's sandbox ended and another may replace it (a restart, a change of limits or network). */
  sandboxEnded: 4410,
} as const;

/** What the relay asks of the session as it goes. */
export interface TerminalSession {
  /** Why the terminal must close now (the session was paused or deleted), or null while it may stay open. */
  check(): Promise<TerminalClose | null>;
  /** Why the agent's connection ended, when the agent said nothing (its sandbox went). */
  lost(): Promise<TerminalClose>;
  /** Input came within the last interval: the session is in use (its idle pause moves on). */
  used(): Promise<void>;
}

export interface RelayOptions {
  /** How often the session is checked, and its use reported. */
  watchMs?: number;
  /** Output waiting for a slow client, past which the sandbox's output is no longer read. */
  highWaterBytes?: number;
  /** Aborted when the gateway shuts down. */
  draining: AbortSignal;
}

/**
 * Relays a terminal between a client's websocket and the sandbox agent's connection: binary messages are keystrokes,
 * a text message `{"type":"resize","cols","rows"}` resizes the terminal, and what the terminal shows goes back as
 * binary messages. Output is read from the agent only while the client keeps up (highWaterBytes), input only while
 * the agent does. Answers how the websocket closed.
 */
export function relayTerminal(
  ws: WebSocket,
  agent: Socket,
  session: TerminalSession,
  { watchMs = 2000, highWaterBytes = 1 << 20, draining }: RelayOptions,
): Promise<TerminalClose> {
  return new Promise((resolve) => {
    const reader = new FrameReader();
    let exit: TerminalClose | null = null;
    let typed = false;
    let closing = false;

    const close = (why: TerminalClose): void => {
      if (closing) return;
      closing = true;
      agent.destroy();
      ws.close(why.code, why.reason.slice(0, 120));
    };

    agent.on('data', (chunk: Buffer) => {
      try {
        for (const f of reader.push(chunk)) {
          if (f.type === FRAME.data) {
            ws.send(f.payload, { binary: true }, () => {
              if (agent.isPaused() && ws.bufferedAmount < highWaterBytes / 4) agent.resume();
            });
            if (ws.bufferedAmount > highWaterBytes) agent.pause();
          } else if (f.type === FRAME.exit) {
            const { code } = JSON.parse(f.payload.toString('utf8')) as { code: number };
            exit = { code: TERMINAL_CLOSE.exited, reason: `the shell exited with code ${code}` };
          }
        }
      } catch (err) {
        close({ code: TERMINAL_CLOSE.agentLost, reason: (err as Error).message });
      }
    });
    agent.on('drain', () => ws.resume());
    agent.on('error', () => {});
    agent.on('close', () => {
      if (closing) return;
      if (exit) return close(exit);
      void session.lost().then(close, () => close({ code: TERMINAL_CLOSE.agentLost, reason: 'the sandbox is gone' }));
    });

    ws.on('message', (data: RawData, isBinary: boolean) => {
      const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      if (isBinary) {
        typed = true;
        if (!agent.write(frame(FRAME.data, bytes))) ws.pause();
        return;
      }
      const resize = readResize(bytes);
      if (resize === null) {
        const reason = 'a text message must be {"type":"resize","cols":1-1000,"rows":1-1000}; send keys as binary';
        return close({ code: TERMINAL_CLOSE.invalidMessage, reason });
      }
      agent.write(resizeFrame(resize.cols, resize.rows));
    });
    ws.on('error', () => {});

    // Paused once the agent's answer was read: reading goes on from here.
    agent.resume();
    const watch = setInterval(() => {
      if (typed) {
        typed = false;
        void session.used().catch(() => {});
      }
      void session.check().then(
        (why) => why && close(why),
        () => {},
      );
    }, watchMs);
    const onDrain = (): void => close({ code: TERMINAL_CLOSE.goingAway, reason: 'the gateway is shutting down' });
    draining.addEventListener('abort', onDrain, { once: true });

    ws.on('close', (code: number, reason: Buffer) => {
      clearInterval(watch);
      draining.removeEventListener('abort', onDrain);
      agent.destroy();
      resolve({ code, reason: reason.toString('utf8') });
    });
  });
}

/** A resize control message, or null for any other text. */
function readResize(bytes: Buffer): { cols: number; rows: number } | null {
  if (bytes.length > 256) return null;
  try {
    const msg = JSON.parse(bytes.toString('utf8')) as { type?: unknown; cols?: unknown; rows?: unknown };
    const ok = (n: unknown): n is number => Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 1000;
    return msg.type === 'resize' && ok(msg.cols) && ok(msg.rows) ? { cols: msg.cols, rows: msg.rows } : null;
  } catch {
    return null;
  }
}

export { MAX_FRAME };
