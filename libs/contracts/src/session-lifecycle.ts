import { Type, type Static } from '@sinclair/typebox';
import { ref, SessionIdSchema, TimestampSchema } from './common.ts';
import { SessionSchema } from './sessions.ts';

export { UndoModeSchema, type UndoMode } from './undo-mode.ts';

/** A snapshot's name: it becomes a directory name, so one pattern, checked everywhere it is used. */
export const SNAPSHOT_NAME_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$';
export const SnapshotNameSchema = Type.String({
  pattern: SNAPSHOT_NAME_PATTERN,
  description: 'Lower-case letters, digits, `-` and `_`, starting with a letter or digit; at most 63.',
  examples: ['before-cleanup'],
});

export const UnsavedVariableSchema = Type.Object(
  { name: Type.String(), reason: Type.String({ description: 'Why it was not saved (e.g. "an open file").' }) },
  { $id: 'UnsavedVariable', title: 'UnsavedVariable' },
);
export type UnsavedVariable = Static<typeof UnsavedVariableSchema>;

export const SavedVariablesSchema = Type.Object(
  {
    saved: Type.Integer({ description: 'Variables saved (functions, classes and modules count as variables).' }),
    unsaved: Type.Array(ref(UnsavedVariableSchema), { description: 'Variables that could not be saved, and why.' }),
    size_bytes: Type.Integer({ description: 'Bytes of the saved variables, counted in the storage quota.' }),
    reason: Type.Optional(
      Type.Literal('save_timeout', {
        description:
          "Set when none could be saved: `save_timeout`, saving them (which runs the session's own `__getstate__`, " +
          '`__reduce__` …) did not end within SANDGATE_STATE_SAVE_TIMEOUT_S. The interpreter was ended; a pause ' +
          'still pauses, keeping the files, and the next interpreter starts afresh.',
      }),
    ),
    error: Type.Optional(Type.String({ description: 'Why none could be saved, when `reason` is set.' })),
  },
  {
    $id: 'SavedVariables',
    title: 'SavedVariables',
    description: "A stateful session's variables, as its interpreter saved them (with dill) to be loaded again later.",
  },
);
export type SavedVariables = Static<typeof SavedVariablesSchema>;

/** Why a session's saved variables did not come back into its new interpreter (ResumedEvent.variables.reason). */
export const RESTORE_FAILURES = ['load_failed', 'load_timeout', 'cancelled'] as const;
export type RestoreFailure = (typeof RESTORE_FAILURES)[number];

export const ResumedEventSchema = Type.Object(
  {
    paused_at: Type.Union([TimestampSchema, Type.Null()], { description: 'When the session was paused.' }),
    duration_ms: Type.Integer({ description: 'How long bringing it back took: a new sandbox, files, variables.' }),
    variables: Type.Union(
      [
        Type.Object({
          restored: Type.Integer({ description: 'Variables loaded back into the new interpreter.' }),
          unsaved: Type.Array(ref(UnsavedVariableSchema), { description: 'Those the pause could not save.' }),
          error: Type.Optional(
            Type.String({ description: 'Why the variables could not be loaded, if they were not.' }),
          ),
          reason: Type.Optional(
            Type.Union(
              RESTORE_FAILURES.map((r) => Type.Literal(r)),
              {
                description:
                  'Set when they were not loaded: `load_failed` (loading them raised an error, or ended the ' +
                  "interpreter) and `load_timeout` (they did not load within the run's time limit): they are dropped, " +
                  'and the session goes on in a fresh interpreter, its files untouched; `cancelled` (the run was ' +
                  'cancelled first): they are kept for the next run.',
              },
            ),
          ),
        }),
        Type.Null(),
      ],
      { description: 'Stateful sessions: what came back of the variables; null for process sessions.' },
    ),
  },
  {
    $id: 'ResumedEvent',
    title: 'ResumedEvent',
    description: 'A paused session was brought back in a new sandbox for this run (or by POST …/resume).',
  },
);
export type ResumedEvent = Static<typeof ResumedEventSchema>;

export const PauseSessionSchema = Type.Object(
  {
    discard_variables: Type.Optional(
      Type.Boolean({
        description:
          'Pause even when the variables cannot be saved (they are larger than SANDGATE_MAX_STATE_BYTES): they are ' +
          'lost. Default false: such a pause answers 413 state_too_large and the session stays as it is.',
      }),
    ),
  },
  { $id: 'PauseSession', title: 'PauseSession', additionalProperties: false },
);
export type PauseSession = Static<typeof PauseSessionSchema>;

export const SessionPauseSchema = Type.Object(
  {
    session: ref(SessionSchema),
    variables: Type.Union([ref(SavedVariablesSchema), Type.Null()], {
      description: 'Stateful sessions: the variables saved; null for process sessions (or when discarded).',
    }),
  },
  { $id: 'SessionPause', title: 'SessionPause' },
);
export type SessionPause = Static<typeof SessionPauseSchema>;

export const SessionResumeSchema = Type.Object(
  {
    session: ref(SessionSchema),
    resumed: Type.Union([ref(ResumedEventSchema), Type.Null()], {
      description: 'How it came back; null when it was not paused (nothing to do).',
    }),
  },
  { $id: 'SessionResume', title: 'SessionResume' },
);
export type SessionResume = Static<typeof SessionResumeSchema>;

export const ForkSessionSchema = Type.Object(
  {
    count: Type.Optional(Type.Integer({ minimum: 1, maximum: 10, description: 'How many copies; default 1.' })),
    metadata: Type.Optional(
      Type.Record(Type.String({ maxLength: 64 }), Type.String({ maxLength: 256 }), {
        maxProperties: 16,
        description: "The copies' labels; default the source's.",
      }),
    ),
  },
  { $id: 'ForkSession', title: 'ForkSession', additionalProperties: false },
);
export type ForkSession = Static<typeof ForkSessionSchema>;

export const SessionForkSchema = Type.Object(
  {
    sessions: Type.Array(ref(SessionSchema), {
      description:
        "The copies, paused: each holds the source's files and saved variables, and comes up in a sandbox of its " +
        'own at its first run (or POST …/resume).',
    }),
  },
  { $id: 'SessionFork', title: 'SessionFork' },
);
export type SessionFork = Static<typeof SessionForkSchema>;

export const CreateSnapshotSchema = Type.Object(
  { name: SnapshotNameSchema },
  { $id: 'CreateSnapshot', title: 'CreateSnapshot', additionalProperties: false },
);
export type CreateSnapshot = Static<typeof CreateSnapshotSchema>;

export const SnapshotSchema = Type.Object(
  {
    name: Type.String(),
    size_bytes: Type.Integer({ description: 'Bytes it holds (files and variables), counted in the storage quota.' }),
    created_at: TimestampSchema,
    variables: Type.Boolean({ description: "It holds a stateful session's variables too." }),
  },
  { $id: 'Snapshot', title: 'Snapshot' },
);
export type Snapshot = Static<typeof SnapshotSchema>;

export const SnapshotListSchema = Type.Object(
  { snapshots: Type.Array(ref(SnapshotSchema), { description: 'Oldest first.' }) },
  { $id: 'SnapshotList', title: 'SnapshotList' },
);
export type SnapshotList = Static<typeof SnapshotListSchema>;

export const SnapshotParamsSchema = Type.Object({ id: SessionIdSchema, name: SnapshotNameSchema });

export const RestoreSnapshotQuerySchema = Type.Object({
  into: Type.Optional(
    Type.Literal('new', {
      description: 'Make a new session (paused) from the snapshot instead of rolling this one back.',
    }),
  ),
});

export const SnapshotRestoreSchema = Type.Object(
  { session: ref(SessionSchema) },
  {
    $id: 'SnapshotRestore',
    title: 'SnapshotRestore',
    description: 'The session rolled back (or the new one, with ?into=new): paused, to come up at its next run.',
  },
);
export type SnapshotRestore = Static<typeof SnapshotRestoreSchema>;

export const SessionUndoSchema = Type.Object(
  {
    session: ref(SessionSchema),
    undone_execution_id: Type.String({ description: 'The run whose changes were undone.' }),
    variables: Type.Boolean({ description: 'The variables were brought back too (undo "state").' }),
    remaining: Type.Integer({ description: 'How many more runs can be undone.' }),
  },
  { $id: 'SessionUndo', title: 'SessionUndo' },
);
export type SessionUndo = Static<typeof SessionUndoSchema>;

/** What a worker does to a session outside a run: each holds the session's lock as a run does. */
export const SESSION_OPS = ['pause', 'resume', 'fork', 'snapshot', 'restore', 'undo'] as const;
export type SessionOpName = (typeof SESSION_OPS)[number];

/**
 * A session operation on the executions queue (job name `session-op`): the gateway has taken the session's lock for
 * it (its value is `op_id`), the worker that takes it does it, writes the answer and lets the lock go.
 */
export const SessionOpJobSchema = Type.Object({
  op_id: Type.String({ pattern: '^op_[0-9a-f]{16}$' }),
  op: Type.Union(SESSION_OPS.map((o) => Type.Literal(o))),
  tenant: Type.String(),
  session_id: SessionIdSchema,
  /** The channel the gateway waiting for the answer listens on. */
  notify: Type.String(),
  /** pause: pause even when the variables cannot be saved. */
  discard_variables: Type.Optional(Type.Boolean()),
  /** fork: the new sessions, made (paused, empty) by the gateway within the tenant's limits. */
  targets: Type.Optional(Type.Array(SessionIdSchema)),
  /** snapshot, restore: the snapshot's name. */
  name: Type.Optional(SnapshotNameSchema),
  /** resume: what a run on the session would ask of its sandbox (limits, image, network …). */
  spec: Type.Optional(Type.Unknown()),
});
export type SessionOpJob = Static<typeof SessionOpJobSchema>;
