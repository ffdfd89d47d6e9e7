import WebSocket from 'ws';
import type { IncomingMessage } from 'node:http';
import type { Problem } from './generated/types.gen.js';
import { SandgateApiError } from './errors.js';

export interface TerminalOptions {
  /** Columns and rows the terminal starts with; default 80 by 24. Resize later with resizeTerminal(). */
  cols?: number;
  rows?: number;
}

/**
 * Opens a websocket to `url` (a session's terminal) and resolves once it is open; a refusal (no such session, too many
 * terminals, …) rejects with the SandgateApiError the gateway answered.
 */
export function openTerminalSocket(url: string, headers: Record<string, string>): Promise<WebSocket> {
  const ws = new WebSocket(url, { headers });
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      ws.off('error', reject);
      resolve(ws);
    });
    ws.once('unexpected-response', (_req, res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let problem: Problem | null;
        try {
          problem = JSON.parse(text) as Problem;
        } catch {
          problem = null;
        }
        reject(new SandgateApiError(res.statusCode ?? 0, problem, `HTTP ${res.statusCode}: ${text.slice(0, 200)}`));
        ws.terminate();
      });
    });
    ws.once('error', reject);
  });
}

/** Resizes an open terminal: the control message the gateway reads (a text message; keys go as binary). */
export function resizeTerminal(ws: WebSocket, cols: number, rows: number): void {
  ws.send(JSON.stringify({ type: 'resize', cols, rows }));
}
