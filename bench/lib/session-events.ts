/**
 * Docker's event stream for sessions' sandboxes: when the engine created, started and destroyed each one. A session's
 * sandbox carries its session id (org.sandgate.session), not a run's, so bench/lib/docker-events.ts does not see it.
 */
import { LABELS } from '@sandgate/backends/testing';
import { containerEvents } from './docker-events.ts';

export class SessionEventLog {
  /** session id → the engine's events for its sandboxes, in order (ms since epoch). */
  readonly bySession = new Map<string, { action: string; at: number }[]>();
  #stream: NodeJS.ReadableStream | null = null;

  /** `deployment`: the stack's Redis prefix (org.sandgate.deployment on its sandboxes). */
  readonly #deployment: string;
  constructor(deployment: string) {
    this.#deployment = deployment;
  }

  async start(): Promise<void> {
    this.#stream = await containerEvents(`${LABELS.deployment}=${this.#deployment}`, (line) => this.#record(line));
  }

  #record(line: string): void {
    try {
      const ev = JSON.parse(line) as {
        Action?: string;
        timeNano?: number;
        Actor?: { Attributes?: Record<string, string> };
      };
      const session = ev.Actor?.Attributes?.[LABELS.session];
      if (!session || !ev.Action || !ev.timeNano) return;
      const list = this.bySession.get(session) ?? [];
      list.push({ action: ev.Action, at: ev.timeNano / 1e6 });
      this.bySession.set(session, list);
    } catch {
      /* not an event line */
    }
  }

  /** The first time the engine reported `action` for the session's sandboxes at or after `since`. */
  at(session: string, action: string, since: number): number | undefined {
    return this.bySession.get(session)?.find((e) => e.action === action && e.at >= since)?.at;
  }

  stop(): void {
    (this.#stream as unknown as { destroy?: () => void } | null)?.destroy?.();
    this.#stream = null;
  }
}
