import type { Artifact, ExecutionResult, TestCase } from '@sandgate/contracts';
import type { StreamEvent } from './event-stream.ts';

export type OutputStream = 'stdout' | 'stderr';

/** What a run's page shows, folded from its SSE events; plain data, so it can be kept across a reload. */
export interface RunView {
  phases: { phase: string; at: string }[];
  /** Output in arrival order; consecutive chunks of one stream are joined (an ANSI code may span two). */
  output: { stream: OutputStream; text: string }[];
  artifacts: Artifact[];
  /** Test mode: the tests that have ended, in order. */
  tests: TestCase[];
  result: ExecutionResult | null;
  /** The id of the last event folded in: where a reconnect resumes. */
  lastEventId: string | null;
}

export const emptyRunView = (): RunView => ({
  phases: [],
  output: [],
  artifacts: [],
  tests: [],
  result: null,
  lastEventId: null,
});

const byPath = (list: Artifact[], a: Artifact) => [...list.filter((x) => x.path !== a.path), a];

/** Folds one event into the view (returns a new view; the old one is left as it was). */
export function applyEvent(view: RunView, ev: StreamEvent): RunView {
  const data = JSON.parse(ev.data) as Record<string, unknown>;
  const next = { ...view, lastEventId: ev.id };
  switch (ev.event) {
    case 'phase':
      return { ...next, phases: [...view.phases, { phase: String(data.phase), at: String(data.at) }] };
    case 'stdout':
    case 'stderr': {
      const text = String(data.text ?? '');
      const tail = view.output.at(-1);
      const output =
        tail?.stream === ev.event
          ? [...view.output.slice(0, -1), { stream: ev.event, text: tail.text + text }]
          : [...view.output, { stream: ev.event as OutputStream, text }];
      return { ...next, output };
    }
    case 'artifact':
      return { ...next, artifacts: byPath(view.artifacts, data.artifact as Artifact) };
    case 'test_result':
      return { ...next, tests: [...(view.tests ?? []), data as unknown as TestCase] };
    case 'result': {
      const result = data.result as ExecutionResult;
      // The result's list is complete and its download links are the freshest.
      // The result's list of tests is the whole one (the events may have been read from the middle).
      const tests = result.tests?.results ?? view.tests ?? [];
      return { ...next, result, tests, artifacts: result.artifacts.reduce(byPath, view.artifacts) };
    }
    default:
      return next;
  }
}

/** The text of one stream, as the run printed it. */
export const streamText = (view: RunView, stream: OutputStream) =>
  view.output
    .filter((o) => o.stream === stream)
    .map((o) => o.text)
    .join('');

const storageKey = (id: string) => `sandgate.run.${id}`;
/** Views larger than this are not kept: a reload then replays the stream from its start, which is as correct. */
const MAX_KEPT_CHARS = 1 << 20;

/** Keeps a run's view in session storage, so a reload resumes the stream where it was instead of replaying it. */
export function keepRunView(id: string, view: RunView): void {
  try {
    const json = JSON.stringify(view);
    if (json.length <= MAX_KEPT_CHARS) sessionStorage.setItem(storageKey(id), json);
    else sessionStorage.removeItem(storageKey(id));
  } catch {
    /* storage full or disabled: replaying is the fallback */
  }
}

export function keptRunView(id: string): RunView | null {
  try {
    const json = sessionStorage.getItem(storageKey(id));
    return json ? (JSON.parse(json) as RunView) : null;
  } catch {
    return null;
  }
}
