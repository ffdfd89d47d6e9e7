/** Docker's own event stream: when the engine created, started, saw die and destroyed each sandgate container. */
import { LABELS, MANAGED_SELECTOR } from '@sandgate/backends/testing';
import { docker } from './raw-docker.ts';

export class DockerEventLog {
  /** execution id → action → ms since epoch. */
  readonly byExecution = new Map<string, Record<string, number>>();
  /** Containers of `deployment` the engine created, by sandgate kind (execution, pool, session), since the reset. */
  created: Record<string, number> = {};
  #stream: NodeJS.ReadableStream | null = null;

  /** `deployment`: the stack's Redis prefix, which sandgate puts on its containers as org.sandgate.deployment. */
  readonly #deployment: string | null;
  constructor(deployment: string | null = null) {
    this.#deployment = deployment;
  }

  async start(): Promise<void> {
    this.#stream = await containerEvents(MANAGED_SELECTOR, (line) => this.#record(line));
  }

  #record(line: string): void {
    try {
      const ev = JSON.parse(line) as {
        Action?: string;
        status?: string;
        timeNano?: number;
        Actor?: { Attributes?: Record<string, string> };
      };
      const attrs = ev.Actor?.Attributes ?? {};
      const exec = attrs[LABELS.execution];
      const action = ev.Action ?? ev.status;
      if (action === 'create' && this.#deployment !== null && attrs[LABELS.deployment] === this.#deployment) {
        const kind = attrs[LABELS.kind] ?? 'unknown';
        this.created[kind] = (this.created[kind] ?? 0) + 1;
      }
      if (!exec || !action || !ev.timeNano) return;
      const rec = this.byExecution.get(exec) ?? {};
      rec[action] ??= ev.timeNano / 1e6;
      this.byExecution.set(exec, rec);
    } catch {
      /* not an event line */
    }
  }

  stop(): void {
    (this.#stream as unknown as { destroy?: () => void } | null)?.destroy?.();
    this.#stream = null;
  }
}

/**
 * Follows the engine's container create/start/die/destroy events of containers labelled `label`: each event's JSON line
 * to `onLine` as it comes. Answers the stream (destroy it to stop).
 */
export async function containerEvents(label: string, onLine: (line: string) => void): Promise<NodeJS.ReadableStream> {
  const stream = (await docker.getEvents({
    filters: { type: ['container'], label: [label], event: ['create', 'start', 'die', 'destroy'] },
  })) as unknown as NodeJS.ReadableStream;
  let buf = '';
  stream.on('data', (chunk: Buffer) => {
    buf += chunk.toString('utf8');
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) onLine(line);
    }
  });
  stream.on('error', () => {});
  return stream;
}
