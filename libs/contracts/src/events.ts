import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { ref } from './common.ts';
import { ProblemSchema } from './errors.ts';
import { ArtifactSchema, ExecutionResultSchema, PHASES, TestCaseSchema, type TestCase } from './executions.ts';
import { ResumedEventSchema, type ResumedEvent } from './session-lifecycle.ts';

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

export const ToolCallEventSchema = Type.Object(
  {
    call: Type.Integer({ description: 'The call within the run: 1, 2, …; its tool_result has the same.' }),
    name: Type.String(),
    args: Type.Unknown({ description: 'The arguments object the code passed.' }),
  },
  { $id: 'ToolCallEvent', title: 'ToolCallEvent', description: "The run's code called a tool." },
);
export const ToolResultEventSchema = Type.Object(
  {
    call: Type.Integer(),
    name: Type.String(),
    ok: Type.Boolean(),
    result: Type.Optional(Type.Unknown({ description: "The tool's answer, when it succeeded." })),
    error: Type.Optional(Type.String({ description: 'Why it failed.' })),
    duration_ms: Type.Integer(),
  },
  { $id: 'ToolResultEvent', title: 'ToolResultEvent', description: 'A tool call ended.' },
);
export type ToolCallEvent = Static<typeof ToolCallEventSchema>;
export type ToolResultEvent = Static<typeof ToolResultEventSchema>;

export type PhaseEvent = Static<typeof PhaseEventSchema>;
export type OutputEvent = Static<typeof OutputEventSchema>;
export type ArtifactEvent = Static<typeof ArtifactEventSchema>;
export type ResultEvent = Static<typeof ResultEventSchema>;

export type ExecutionEvent =
  | { type: 'phase'; data: PhaseEvent }
  | { type: 'stdout'; data: OutputEvent }
  | { type: 'stderr'; data: OutputEvent }
  | { type: 'artifact'; data: ArtifactEvent }
  | { type: 'test_result'; data: TestCase }
  | { type: 'tool_call'; data: ToolCallEvent }
  | { type: 'tool_result'; data: ToolResultEvent }
  | { type: 'resumed'; data: ResumedEvent }
  | { type: 'result'; data: ResultEvent };

export type EventType = ExecutionEvent['type'];
export const EVENT_TYPES: readonly EventType[] = [
  'phase',
  'stdout',
  'stderr',
  'artifact',
  'test_result',
  'tool_call',
  'tool_result',
  'resumed',
  'result',
];

/**
 * One event of GET /v1/executions/{id}/events as an SSE parser hands it over: `event` names the type, `id` resumes the
 * stream (Last-Event-ID), `data` is the JSON payload. The response body is a sequence of these; the last is `result`,
 * or `error` when the stream failed after it had started.
 */
const frame = (event: string, data: TSchema, description: string) =>
  Type.Object(
    {
      id: Type.String({ pattern: '^\\d+-\\d+$', description: 'Pass as Last-Event-ID to resume after this event.' }),
      event: Type.Literal(event),
      data,
    },
    { description },
  );

export const ExecutionStreamEventSchema = Type.Union(
  [
    frame('phase', ref(PhaseEventSchema), 'The run entered a phase: queued → starting → running → harvesting → done.'),
    frame('stdout', ref(OutputEventSchema), 'A chunk of standard output.'),
    frame('stderr', ref(OutputEventSchema), 'A chunk of standard error.'),
    frame('artifact', ref(ArtifactEventSchema), 'A file the run created or changed.'),
    frame('test_result', ref(TestCaseSchema), 'Test mode: one test ended.'),
    frame('tool_call', ref(ToolCallEventSchema), "The run's code called a tool (sandgate.tools)."),
    frame('tool_result', ref(ToolResultEventSchema), 'A tool call ended.'),
    frame('resumed', ref(ResumedEventSchema), 'The session was paused: this run brought it back in a new sandbox.'),
    frame('result', ref(ResultEventSchema), 'The run ended: the last event; the server then closes the stream.'),
    Type.Object(
      {
        event: Type.Literal('error'),
        data: ref(ProblemSchema),
      },
      { description: 'The stream failed after it had started (no id: it cannot be resumed after).' },
    ),
  ],
  {
    $id: 'ExecutionStreamEvent',
    title: 'ExecutionStreamEvent',
    description: 'One server-sent event; the response is a stream of them, each `data` a JSON document.',
  },
);
export type ExecutionStreamEvent = Static<typeof ExecutionStreamEventSchema>;
