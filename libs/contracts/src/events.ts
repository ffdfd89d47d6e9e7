import { Type, type Static } from '@sinclair/typebox';
import { ref } from './common.ts';
import { ArtifactSchema, ExecutionResultSchema, PHASES } from './executions.ts';

/** Payloads of the SSE events of one execution; the SSE `event:` field is the key. */
export const PhaseEventSchema = Type.Object(
  { phase: Type.Union(PHASES.map((p) => Type.Literal(p))), at: Type.String({ format: 'date-time' }) },
  { $id: 'PhaseEvent', title: 'PhaseEvent' },
);
export const OutputEventSchema = Type.Object(
  { text: Type.String() },
  { $id: 'OutputEvent', title: 'OutputEvent', description: 'A chunk of stdout or stderr, in order.' },
);
export const ArtifactEventSchema = Type.Object(
  { artifact: ref(ArtifactSchema) },
  { $id: 'ArtifactEvent', title: 'ArtifactEvent' },
);
export const ResultEventSchema = Type.Object(
  { result: ref(ExecutionResultSchema) },
  { $id: 'ResultEvent', title: 'ResultEvent', description: 'The last event of the stream.' },
);

export type PhaseEvent = Static<typeof PhaseEventSchema>;
export type OutputEvent = Static<typeof OutputEventSchema>;
export type ArtifactEvent = Static<typeof ArtifactEventSchema>;
export type ResultEvent = Static<typeof ResultEventSchema>;

export type ExecutionEvent =
  | { type: 'phase'; data: PhaseEvent }
  | { type: 'stdout'; data: OutputEvent }
  | { type: 'stderr'; data: OutputEvent }
  | { type: 'artifact'; data: ArtifactEvent }
  | { type: 'result'; data: ResultEvent };

export type EventType = ExecutionEvent['type'];
export const EVENT_TYPES: readonly EventType[] = ['phase', 'stdout', 'stderr', 'artifact', 'result'];
