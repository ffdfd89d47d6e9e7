import { Type, type Static, type TObject } from '@sinclair/typebox';
import { LANGUAGES } from './executions.ts';
import { ServiceNameSchema, ServiceSchema, StartServiceSchema } from './services.ts';
import { MAX_SESSION_VOLUMES, MountVolumeSchema, VolumeSchema, VolumeUserSchema } from './volumes.ts';
import { TEMPLATE_STATES, TemplateNameSchema } from './templates.ts';
import { RESTORE_FAILURES, SNAPSHOT_NAME_PATTERN, SnapshotNameSchema } from './session-lifecycle.ts';
import { UndoModeSchema } from './undo-mode.ts';
import { SessionMetricsSchema } from './metrics.ts';

/**
 * The tools sandgate serves over MCP at /mcp. Names, fields and error codes are those of the Python-sandbox tool
 * contract agents already use (upload_file, run_python, read_artifact, list_artifacts, close_session), plus
 * run_code and create_session. Every schema here is self-contained (no $ref), since MCP clients read each
 * tool's JSON Schema on its own.
 */

/** Where a session's files are inside the sandbox; MCP paths are shown under it. */
export const MCP_DATA_ROOT = '/mnt/data';

const SessionIdInput = (required: boolean) =>
  Type.String({
    minLength: 1,
    maxLength: 64,
    description: required
      ? 'The session (sess_ + 12 hex) returned by an earlier call.'
      : 'The session to use (sess_ + 12 hex), as returned by an earlier call. Omit it to start a new session; ' +
        'the response carries its id.',
  });
const PathInput = Type.String({
  minLength: 1,
  maxLength: 1100,
  description: `A path in the session: absolute under ${MCP_DATA_ROOT}/ or relative to it (e.g. "chart.png").`,
});

export const UploadFileInputSchema = Type.Object(
  {
    session_id: Type.Optional(SessionIdInput(false)),
    filename: Type.String({
      minLength: 1,
      maxLength: 1100,
      description: `Name to save the file as, relative to ${MCP_DATA_ROOT}/ (sub-directories allowed; ".." is refused).`,
    }),
    content_base64: Type.String({ description: "The file's bytes, base64-encoded." }),
    overwrite: Type.Optional(
      Type.Boolean({ default: false, description: 'Replace an existing file (default false).' }),
    ),
    private: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          'The file is private data: the session loses network access for the rest of its life (it cannot be ' +
          'undone). Only matters where the operator allows sessions egress.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type UploadFileInput = Static<typeof UploadFileInputSchema>;

export const RunPythonInputSchema = Type.Object(
  {
    session_id: Type.Optional(SessionIdInput(false)),
    code: Type.String({
      description:
        `Python 3 source. It runs with ${MCP_DATA_ROOT} as its working directory; files it writes there are ` +
        'returned as artifacts. pandas, numpy, matplotlib, seaborn, scipy, openpyxl and reportlab are installed; ' +
        'there is no network.',
    }),
  },
  { additionalProperties: false },
);
export type RunPythonInput = Static<typeof RunPythonInputSchema>;

export const RunCodeInputSchema = Type.Object(
  {
    session_id: Type.Optional(SessionIdInput(false)),
    language: Type.Union(
      LANGUAGES.map((l) => Type.Literal(l)),
      { description: 'Language of `code`.' },
    ),
    code: Type.String({ description: `Source to run, with ${MCP_DATA_ROOT} as the working directory; no network.` }),
  },
  { additionalProperties: false },
);
export type RunCodeInput = Static<typeof RunCodeInputSchema>;

export const RunTestsInputSchema = Type.Object(
  {
    session_id: Type.Optional(SessionIdInput(false)),
    language: Type.Union([Type.Literal('python'), Type.Literal('javascript'), Type.Literal('typescript')], {
      description: 'Language of `code` and `tests`: pytest runs python, node:test javascript and typescript.',
    }),
    code: Type.String({
      description:
        "The implementation: the module `main` beside the tests (`from main import f`; `import { f } from './main.js'`).",
    }),
    tests: Type.String({ description: `The tests, run with ${MCP_DATA_ROOT} as the working directory; no network.` }),
  },
  { additionalProperties: false },
);
export type RunTestsInput = Static<typeof RunTestsInputSchema>;

export const ReadArtifactInputSchema = Type.Object(
  {
    session_id: SessionIdInput(true),
    path: PathInput,
  },
  { additionalProperties: false },
);
export type ReadArtifactInput = Static<typeof ReadArtifactInputSchema>;

export const SessionInputSchema = Type.Object({ session_id: SessionIdInput(true) }, { additionalProperties: false });
export type SessionInput = Static<typeof SessionInputSchema>;

export const CreateSessionInputSchema = Type.Object(
  {
    mode: Type.Optional(
      Type.Union([Type.Literal('process'), Type.Literal('stateful')], {
        default: 'process',
        description:
          '`process`: every run is a new process, files persist. `stateful`: a live Python interpreter keeps ' +
          'variables between runs, like a notebook, and a run returns the value of its last expression (python only).',
      }),
    ),
    volumes: Type.Optional(
      Type.Array(Type.Object({ ...MountVolumeSchema.properties }, { additionalProperties: false }), {
        maxItems: MAX_SESSION_VOLUMES,
        description:
          'Volumes to mount for the life of the session (list_volumes shows them): files that outlive sessions, ' +
          'shared between them, at /mnt/volumes/<name> unless path says otherwise. One session at a time may mount ' +
          'a volume read-write (volume_in_use otherwise); any number read-only.',
      }),
    ),
    template: Type.Optional(
      Type.String({
        ...TemplateNameSchema,
        description:
          "The template of the session's sandbox (list_templates shows those you may use): packages and files on " +
          'top of the runtime image. Default: the runtime image.',
      }),
    ),
    idle_pause_seconds: Type.Optional(
      Type.Integer({
        minimum: 10,
        maximum: 366 * 86_400,
        description:
          'Idle seconds after which the session pauses by itself (its sandbox goes, files and variables are kept; ' +
          "the next run brings it back). Default: the operator's, 300.",
      }),
    ),
    undo: Type.Optional(
      Type.Union(UndoModeSchema.anyOf, {
        description:
          'What undo_run brings back: "files" (default) the files as before the last run; "state" the variables too ' +
          '(a stateful session saves them before every run, which costs each run that time); "off" nothing is ' +
          'kept. Undo needs a data directory on btrfs; elsewhere it is "off".',
      }),
    ),
  },
  { additionalProperties: false },
);
export type CreateSessionInput = Static<typeof CreateSessionInputSchema>;

export const PauseSessionInputSchema = Type.Object(
  {
    session_id: SessionIdInput(true),
    discard_variables: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          'Pause even when the variables are too large to save (they are lost). Default false: such a pause fails ' +
          'with state_too_large and the session stays as it is.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type PauseSessionInput = Static<typeof PauseSessionInputSchema>;

export const ForkSessionInputSchema = Type.Object(
  {
    session_id: SessionIdInput(true),
    count: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 10, default: 1, description: 'How many copies (1 to 10); default 1.' }),
    ),
    metadata: Type.Optional(
      Type.Record(Type.String({ maxLength: 64 }), Type.String({ maxLength: 256 }), {
        maxProperties: 16,
        description: "The copies' labels (at most 16, as on create_session); default the source's.",
      }),
    ),
  },
  { additionalProperties: false },
);
export type ForkSessionInput = Static<typeof ForkSessionInputSchema>;

const SnapshotNameInput = Type.String({
  pattern: SNAPSHOT_NAME_PATTERN,
  description: `The snapshot's name: ${SnapshotNameSchema.description!}`,
});

export const SnapshotInputSchema = Type.Object(
  { session_id: SessionIdInput(true), name: SnapshotNameInput },
  { additionalProperties: false },
);
export type SnapshotInput = Static<typeof SnapshotInputSchema>;

export const RestoreSnapshotInputSchema = Type.Object(
  {
    session_id: SessionIdInput(true),
    name: SnapshotNameInput,
    into_new: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          'Make a new session from the snapshot and leave this one as it is. Default false: roll this session back.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type RestoreSnapshotInput = Static<typeof RestoreSnapshotInputSchema>;

/** An error, as the `structuredContent` of a result with `isError: true`. */
export const McpToolErrorSchema = Type.Object({
  error: Type.String({
    description:
      'Stable code: file_exists, session_busy, max_sessions, session_not_found, not_found, ' +
      'artifact_too_large, invalid_path, payload_too_large, unsupported_language, validation_failed, ' +
      'snapshot_not_found, snapshot_exists, max_snapshots, nothing_to_undo, state_too_large, internal, …',
  }),
  message: Type.String(),
  session_id: Type.Optional(Type.String()),
  size_bytes: Type.Optional(Type.Integer({ description: "artifact_too_large: the file's size." })),
  download_url: Type.Optional(Type.String({ description: 'artifact_too_large: a signed URL to fetch it instead.' })),
});
export type McpToolError = Static<typeof McpToolErrorSchema>;

const SessionId = Type.String({ description: 'The session used (or created): pass it to later calls.' });
const AbsolutePath = Type.String({ description: `Absolute path in the sandbox, under ${MCP_DATA_ROOT}/.` });

export const UploadFileOutputSchema = Type.Object({ session_id: SessionId, path: AbsolutePath });
export type UploadFileOutput = Static<typeof UploadFileOutputSchema>;

export const McpArtifactSchema = Type.Object({
  path: AbsolutePath,
  filename: Type.String(),
  size_bytes: Type.Integer(),
  mime_type: Type.String(),
  download_url: Type.String({ description: 'Signed, expiring URL; needs no API key.' }),
});
export type McpArtifact = Static<typeof McpArtifactSchema>;

const UnsavedVariables = Type.Array(Type.Object({ name: Type.String(), reason: Type.String() }), {
  description: 'Variables that could not be saved (an open file, a socket, a thread …), and why.',
});

/** A paused session brought back: for resume_session, and for a run that did it. */
const McpResumedSchema = Type.Object(
  {
    paused_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    duration_ms: Type.Integer({ description: 'How long bringing it back took: a new sandbox, files, variables.' }),
    variables: Type.Union(
      [
        Type.Object({
          restored: Type.Integer(),
          unsaved: UnsavedVariables,
          error: Type.Optional(Type.String({ description: 'Why the variables could not be loaded, if not.' })),
          reason: Type.Optional(
            Type.Union(
              RESTORE_FAILURES.map((r) => Type.Literal(r)),
              {
                description:
                  'Set when they were not loaded: load_failed or load_timeout (dropped: a fresh interpreter, files ' +
                  'untouched), cancelled (kept for the next run).',
              },
            ),
          ),
        }),
        Type.Null(),
      ],
      { description: 'A stateful session: what came back of its variables; null otherwise.' },
    ),
  },
  { description: 'The session was paused and came back in a new sandbox.' },
);

export const RunOutputSchema = Type.Object({
  session_id: SessionId,
  run_id: Type.String({ description: 'The execution (exec_…), also visible at GET /v1/executions/{id}.' }),
  state: Type.Union(['completed', 'failed', 'timeout', 'cancelled', 'error'].map((s) => Type.Literal(s))),
  exit_code: Type.Integer({ description: '-1 on timeout or when the code never ran.' }),
  stdout: Type.String(),
  stderr: Type.String(),
  stdout_truncated: Type.Boolean(),
  stderr_truncated: Type.Boolean(),
  artifacts: Type.Array(McpArtifactSchema, { description: 'Files the run created or changed (successful runs only).' }),
  duration_ms: Type.Integer(),
  value: Type.Optional(Type.String({ description: "Stateful sessions: repr() of the last expression's value." })),
  message: Type.Optional(Type.String({ description: 'Why the platform ended the run, when it did.' })),
  resumed: Type.Optional(
    Type.Object(McpResumedSchema.properties, {
      description:
        'The session was paused (pause_session, or idle) and this run brought it back: how long that took, and ' +
        'what came back of its variables (those in unsaved are gone).',
    }),
  ),
  tests: Type.Optional(
    Type.Object(
      {
        summary: Type.Object({
          total: Type.Integer(),
          passed: Type.Integer(),
          failed: Type.Integer(),
          skipped: Type.Integer(),
        }),
        results: Type.Array(
          Type.Object({
            name: Type.String(),
            passed: Type.Boolean(),
            skipped: Type.Boolean(),
            error: Type.Union([Type.String(), Type.Null()]),
            duration_ms: Type.Number(),
          }),
        ),
        results_truncated: Type.Optional(Type.Boolean()),
      },
      { description: 'run_tests: each test, and the counts.' },
    ),
  ),
});
export type RunOutput = Static<typeof RunOutputSchema>;

export const ReadArtifactOutputSchema = Type.Object({
  session_id: SessionId,
  path: AbsolutePath,
  filename: Type.String(),
  mime_type: Type.String(),
  size_bytes: Type.Integer(),
  content_base64: Type.String(),
});
export type ReadArtifactOutput = Static<typeof ReadArtifactOutputSchema>;

export const ListArtifactsOutputSchema = Type.Object({
  session_id: SessionId,
  artifacts: Type.Array(McpArtifactSchema, { description: `Every file now in the session's ${MCP_DATA_ROOT}/.` }),
  truncated: Type.Optional(Type.Boolean({ description: 'More files exist than were listed.' })),
});
export type ListArtifactsOutput = Static<typeof ListArtifactsOutputSchema>;

export const CloseSessionOutputSchema = Type.Object({ session_id: SessionId, status: Type.Literal('closed') });
export type CloseSessionOutput = Static<typeof CloseSessionOutputSchema>;

export const CreateSessionOutputSchema = Type.Object({
  session_id: SessionId,
  mode: Type.Union([Type.Literal('process'), Type.Literal('stateful')]),
  expires_at: Type.String({ format: 'date-time', description: 'When the session expires if left idle.' }),
  volumes: Type.Array(Type.Object({ name: Type.String(), path: Type.String(), read_only: Type.Boolean() }), {
    description: 'The volumes it mounts, and where.',
  }),
  template: Type.Union([Type.String(), Type.Null()], { description: 'Its template; null: the runtime image.' }),
  undo: Type.String({ description: 'What undo_run brings back: files, state or off.' }),
});
export type CreateSessionOutput = Static<typeof CreateSessionOutputSchema>;

export const StartServiceInputSchema = Type.Object(
  {
    session_id: SessionIdInput(true),
    name: ServiceNameSchema,
    command: StartServiceSchema.properties.command,
    port: StartServiceSchema.properties.port,
  },
  { additionalProperties: false },
);
export type StartServiceInput = Static<typeof StartServiceInputSchema>;

export const ServiceInputSchema = Type.Object(
  {
    session_id: SessionIdInput(true),
    name: ServiceNameSchema,
    grace_ms: Type.Optional(
      Type.Integer({ minimum: 0, maximum: 60_000, description: 'stop_service: time between SIGTERM and SIGKILL.' }),
    ),
  },
  { additionalProperties: false },
);
export type ServiceInput = Static<typeof ServiceInputSchema>;

export const RevokePreviewsInputSchema = Type.Object(
  { session_id: SessionIdInput(true), name: ServiceNameSchema },
  { additionalProperties: false },
);
export type RevokePreviewsInput = Static<typeof RevokePreviewsInputSchema>;

export const ServiceLogsInputSchema = Type.Object(
  {
    session_id: SessionIdInput(true),
    name: ServiceNameSchema,
    offset: Type.Optional(
      Type.Integer({ minimum: 0, description: 'next_offset of the previous call: only what came since. Default 0.' }),
    ),
  },
  { additionalProperties: false },
);
export type ServiceLogsInput = Static<typeof ServiceLogsInputSchema>;

/** A service as MCP shows it: the REST shape, inlined (every tool schema stands alone). */
const McpServiceSchema = Type.Object({ ...ServiceSchema.properties });

export const ServiceOutputSchema = Type.Object({
  session_id: SessionId,
  service: McpServiceSchema,
  preview_url: Type.Optional(
    Type.String({
      description: 'A link that opens the service in a browser without a key, for an hour: hand it to a person.',
    }),
  ),
});
export type ServiceOutput = Static<typeof ServiceOutputSchema>;

export const RevokePreviewsOutputSchema = Type.Object({
  session_id: SessionId,
  name: Type.String(),
  status: Type.Literal('revoked'),
});
export type RevokePreviewsOutput = Static<typeof RevokePreviewsOutputSchema>;

/** session_metrics: the figures of GET /v1/sessions/{id}/metrics, as a plain object (no `$id` in a tool's schema). */
export const SessionMetricsOutputSchema = Type.Object({ ...SessionMetricsSchema.properties });

export const ServiceListOutputSchema = Type.Object({ session_id: SessionId, services: Type.Array(McpServiceSchema) });

export const ServiceLogsOutputSchema = Type.Object({
  session_id: SessionId,
  name: Type.String(),
  output: Type.String({ description: 'stdout and stderr together, from offset.' }),
  offset: Type.Integer(),
  next_offset: Type.Integer({ description: 'Pass as offset next time.' }),
  state: Type.String(),
});

export const CallToolInputSchema = Type.Object(
  {
    name: Type.String({
      pattern: '^[a-z][a-z0-9_]{0,31}(\\.[a-z][a-z0-9_]{0,31}){0,3}$',
      description: 'A tool list_tools shows, e.g. "weather.get".',
    }),
    arguments: Type.Optional(
      Type.Record(Type.String(), Type.Unknown(), { description: "Checked against the tool's input_schema." }),
    ),
  },
  { additionalProperties: false },
);
export type CallToolInput = Static<typeof CallToolInputSchema>;

export const ListToolsOutputSchema = Type.Object({
  tools: Type.Array(
    Type.Object({
      name: Type.String(),
      description: Type.Union([Type.String(), Type.Null()]),
      input_schema: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]),
    }),
  ),
});

export const CallToolOutputSchema = Type.Object({
  name: Type.String(),
  ok: Type.Boolean({ description: 'The tool answered; false: error says why not.' }),
  result: Type.Optional(Type.Unknown()),
  error: Type.Optional(Type.String()),
  duration_ms: Type.Integer(),
});

export const ListVolumesOutputSchema = Type.Object({
  volumes: Type.Array(
    Type.Object({
      ...VolumeSchema.properties,
      mounted_by: Type.Array(Type.Object({ ...VolumeUserSchema.properties })),
    }),
    { description: "The tenant's volumes, by name." },
  ),
});

export const ListTemplatesOutputSchema = Type.Object({
  templates: Type.Array(
    Type.Object({
      name: Type.String(),
      description: Type.String(),
      state: Type.Union(
        TEMPLATE_STATES.map((x) => Type.Literal(x)),
        {
          description: 'ready: sessions can be made of it; building: not yet; failed: its recipe did not build.',
        },
      ),
      debian_packages: Type.Array(Type.String()),
      python_packages: Type.Array(Type.String()),
      npm_packages: Type.Array(Type.String()),
    }),
    { description: 'The templates you may use, by name.' },
  ),
});

/** A session as the lifecycle tools answer it: where it stands, in a few fields. */
const McpSessionFields = {
  session_id: SessionId,
  mode: Type.Union([Type.Literal('process'), Type.Literal('stateful')]),
  state: Type.Union([Type.Literal('idle'), Type.Literal('busy'), Type.Literal('paused')], {
    description: 'paused: no sandbox; its files and variables are kept, and its next run brings it back.',
  }),
  paused_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  expires_at: Type.String({ format: 'date-time', description: 'When it is deleted if left unused (paused or not).' }),
  forked_from: Type.Union([Type.String(), Type.Null()], { description: 'The session it is a copy of, if any.' }),
  template: Type.Union([Type.String(), Type.Null()], { description: 'Its template; null: the runtime image.' }),
};
export const McpSessionSchema = Type.Object(McpSessionFields);
export type McpSession = Static<typeof McpSessionSchema>;

export const PauseSessionOutputSchema = Type.Object({
  ...McpSessionFields,
  variables: Type.Union(
    [
      Type.Object({
        saved: Type.Integer(),
        unsaved: UnsavedVariables,
        size_bytes: Type.Integer(),
        reason: Type.Optional(
          Type.Literal('save_timeout', {
            description: 'None could be saved in time (the interpreter was ended); the session paused all the same.',
          }),
        ),
        error: Type.Optional(Type.String()),
      }),
      Type.Null(),
    ],
    { description: 'A stateful session: the variables saved, and those that could not be; null otherwise.' },
  ),
});

export const ResumeSessionOutputSchema = Type.Object({
  ...McpSessionFields,
  resumed: Type.Union([McpResumedSchema, Type.Null()], {
    description: 'How it came back; null when it was not paused (nothing to do).',
  }),
});

export const ForkSessionOutputSchema = Type.Object({
  session_id: Type.String({ description: 'The source session, which keeps going.' }),
  sessions: Type.Array(Type.Object({ ...McpSessionFields, metadata: Type.Record(Type.String(), Type.String()) }), {
    description: 'The copies, paused: each comes up in a sandbox of its own at its first run.',
  }),
});

const McpSnapshotFields = {
  name: Type.String(),
  size_bytes: Type.Integer({ description: 'Bytes it holds, counted in the storage quota.' }),
  created_at: Type.String({ format: 'date-time' }),
  variables: Type.Boolean({ description: "It holds a stateful session's variables too." }),
};

export const SnapshotOutputSchema = Type.Object({ session_id: SessionId, ...McpSnapshotFields });

export const ListSnapshotsOutputSchema = Type.Object({
  session_id: SessionId,
  snapshots: Type.Array(Type.Object(McpSnapshotFields), { description: 'Oldest first.' }),
});

export const RestoreSnapshotOutputSchema = Type.Object({
  ...McpSessionFields,
  session_id: Type.String({
    description: 'The session that now holds the snapshot: the one rolled back, or the new one (into_new).',
  }),
  snapshot: Type.String(),
  from_session_id: Type.String({ description: 'The session whose snapshot it is.' }),
});

export const DeleteSnapshotOutputSchema = Type.Object({
  session_id: SessionId,
  name: Type.String(),
  status: Type.Literal('deleted'),
});

export const UndoRunOutputSchema = Type.Object({
  ...McpSessionFields,
  undone_run_id: Type.String({ description: 'The run whose changes were undone.' }),
  variables: Type.Boolean({ description: 'The variables were brought back too (undo "state").' }),
  remaining: Type.Integer({ description: 'How many more runs can be undone.' }),
});

/** A tool's output schema: its result or an error (MCP wants `type: "object"` at the root). */
const orError = <T extends TObject>(ok: T) =>
  Type.Unsafe<Static<T> | McpToolError>({ type: 'object', anyOf: [ok, McpToolErrorSchema] });

export interface McpToolDefinition {
  name: string;
  title: string;
  description: string;
  inputSchema: TObject;
  outputSchema: ReturnType<typeof orError>;
  annotations: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
}

const RUN_NOTE =
  'Returns exit_code, stdout, stderr and the artifacts (files created or changed; charts also come ' +
  'back as images). One run at a time per session (session_busy otherwise). Progress notifications carry the ' +
  'phases and output while it runs; cancelling the request cancels the run.';

export const MCP_TOOLS = [
  {
    name: 'upload_file',
    title: 'Upload a file',
    description:
      `Save a file into the session's ${MCP_DATA_ROOT}/ so code can read it. Creates a session when ` +
      'session_id is omitted. An existing file is an error (file_exists) unless overwrite is true.',
    inputSchema: UploadFileInputSchema,
    outputSchema: orError(UploadFileOutputSchema),
    annotations: { destructiveHint: false, openWorldHint: false },
  },
  {
    name: 'run_python',
    title: 'Run Python',
    description:
      `Run Python 3 code in an isolated sandbox, in the session's ${MCP_DATA_ROOT}. Creates a session when ` +
      `session_id is omitted. ${RUN_NOTE}`,
    inputSchema: RunPythonInputSchema,
    outputSchema: orError(RunOutputSchema),
    annotations: { destructiveHint: false, openWorldHint: false },
  },
  {
    name: 'run_code',
    title: 'Run code',
    description: `Run code in another language (${LANGUAGES.join(', ')}) in the session's sandbox. ${RUN_NOTE}`,
    inputSchema: RunCodeInputSchema,
    outputSchema: orError(RunOutputSchema),
    annotations: { destructiveHint: false, openWorldHint: false },
  },
  {
    name: 'run_tests',
    title: 'Run tests',
    description:
      "Run `tests` against `code` with the language's usual framework (pytest for python, node:test for " +
      "javascript and typescript) in the session's sandbox. Returns `tests`: each test's name, passed, error (the " +
      'assertion message) and duration_ms, and a summary {total, passed, failed, skipped}; stdout is the ' +
      "framework's report. state is completed when every test passed, failed when one failed, error (reason " +
      'tests_not_run) when none could run, e.g. a syntax error. Progress notifications carry each test as it ends.',
    inputSchema: RunTestsInputSchema,
    outputSchema: orError(RunOutputSchema),
    annotations: { destructiveHint: false, openWorldHint: false },
  },
  {
    name: 'read_artifact',
    title: 'Read a file',
    description:
      `Read a file of the session (e.g. a chart a run made) as base64; an image also comes back as an ` +
      'image. Files over the size limit answer artifact_too_large with a download_url.',
    inputSchema: ReadArtifactInputSchema,
    outputSchema: orError(ReadArtifactOutputSchema),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: 'list_artifacts',
    title: 'List files',
    description: `List every file now in the session's ${MCP_DATA_ROOT}/, with sizes, types and download URLs.`,
    inputSchema: SessionInputSchema,
    outputSchema: orError(ListArtifactsOutputSchema),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: 'close_session',
    title: 'Close a session',
    description: 'Close the session: its sandbox and files are deleted, a running run is cancelled.',
    inputSchema: SessionInputSchema,
    outputSchema: orError(CloseSessionOutputSchema),
    annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
  },
  {
    name: 'create_session',
    title: 'Open a session',
    description:
      'Open a session explicitly. mode "stateful" keeps a live Python interpreter between runs (variables, ' +
      'imports, DataFrames), and each run returns the value of its last expression.',
    inputSchema: CreateSessionInputSchema,
    outputSchema: orError(CreateSessionOutputSchema),
    annotations: { destructiveHint: false, openWorldHint: false },
  },
  {
    name: 'list_volumes',
    title: 'List volumes',
    description:
      "The tenant's volumes: storage that outlives sessions, made over the REST API (POST /v1/volumes), with their " +
      'size, the bytes they hold, and the sessions that mount them. Mount one with create_session volumes; code ' +
      'then finds its files under /mnt/volumes/<name>.',
    inputSchema: Type.Object({}, { additionalProperties: false }),
    outputSchema: orError(ListVolumesOutputSchema),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: 'list_templates',
    title: 'List templates',
    description:
      'The templates you may make a session of: packages (Debian, Python, npm) and files on top of the runtime ' +
      "image, set up by the operator. Pass one's name as create_session template to have its packages in the sandbox.",
    inputSchema: Type.Object({}, { additionalProperties: false }),
    outputSchema: orError(ListTemplatesOutputSchema),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: 'pause_session',
    title: 'Pause a session',
    description:
      "Pause the session: its sandbox is removed (no memory, no CPU), its files kept, and a stateful session's " +
      'variables saved (those that cannot be, like open files, sockets and threads, are named). Its next run, or ' +
      'resume_session, brings it back in a new sandbox. Idle sessions also pause by themselves.',
    inputSchema: PauseSessionInputSchema,
    outputSchema: orError(PauseSessionOutputSchema),
    annotations: { destructiveHint: false, idempotentHint: true, openWorldHint: false },
  },
  {
    name: 'resume_session',
    title: 'Resume a session',
    description:
      'Bring a paused session back now, in a new sandbox with its files and variables, and say how long it took ' +
      '(a run on a paused session does this by itself). A session that is not paused is left as it is.',
    inputSchema: SessionInputSchema,
    outputSchema: orError(ResumeSessionOutputSchema),
    annotations: { destructiveHint: false, idempotentHint: true, openWorldHint: false },
  },
  {
    name: 'fork_session',
    title: 'Fork a session',
    description:
      'Copy the session (count 1 to 10): each copy holds its files and saved variables and goes its own way from ' +
      'then on, to try several ideas from one state. The copies start paused; the source keeps going.',
    inputSchema: ForkSessionInputSchema,
    outputSchema: orError(ForkSessionOutputSchema),
    annotations: { destructiveHint: false, openWorldHint: false },
  },
  {
    name: 'snapshot_session',
    title: 'Snapshot a session',
    description:
      "Keep the session's files (and a stateful session's variables) as they are now, under a name, to go back to " +
      'with restore_snapshot. Snapshots count against the storage quota; a session keeps a limited number ' +
      '(max_snapshots: delete one with delete_snapshot).',
    inputSchema: SnapshotInputSchema,
    outputSchema: orError(SnapshotOutputSchema),
    annotations: { destructiveHint: false, openWorldHint: false },
  },
  {
    name: 'list_snapshots',
    title: 'List snapshots',
    description: "The session's snapshots, oldest first, with their sizes.",
    inputSchema: SessionInputSchema,
    outputSchema: orError(ListSnapshotsOutputSchema),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: 'restore_snapshot',
    title: 'Restore a snapshot',
    description:
      "Roll the session back to a snapshot: its files (and variables) become the snapshot's, its sandbox goes and " +
      'it comes back at its next run. With into_new, a new session is made from the snapshot instead and this one ' +
      'is left as it is. Refused while a run is going (session_busy).',
    inputSchema: RestoreSnapshotInputSchema,
    outputSchema: orError(RestoreSnapshotOutputSchema),
    annotations: { destructiveHint: true, openWorldHint: false },
  },
  {
    name: 'delete_snapshot',
    title: 'Delete a snapshot',
    description: "Delete one of the session's snapshots, freeing its room.",
    inputSchema: SnapshotInputSchema,
    outputSchema: orError(DeleteSnapshotOutputSchema),
    annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
  },
  {
    name: 'undo_run',
    title: 'Undo the last run',
    description:
      "Bring the session's files back to how they were before its last run (a bad rm, a half-finished change); " +
      'call it again to go one run further back. A session made with undo "state" gets its variables back too. ' +
      'nothing_to_undo when no step is left (or undo is off).',
    inputSchema: SessionInputSchema,
    outputSchema: orError(UndoRunOutputSchema),
    annotations: { destructiveHint: true, openWorldHint: false },
  },
  {
    name: 'start_service',
    title: 'Start a service',
    description:
      'Start a long-running program in the session (a web app, an API, a notebook server) that stays up between ' +
      'runs, e.g. command "python3 -m http.server 8000". Answers once it runs, with its ports and a preview_url a ' +
      'person can open in a browser. Follow it with service_logs; stop it with stop_service.',
    inputSchema: StartServiceInputSchema,
    outputSchema: orError(ServiceOutputSchema),
    annotations: { destructiveHint: false, openWorldHint: false },
  },
  {
    name: 'session_metrics',
    title: "A session's CPU, memory, processes and disk",
    description:
      "The session's sandbox now: cpu_percent (of one core), memory_bytes against memory_limit_bytes, pids, and " +
      'disk_bytes against disk_limit_bytes (the session quota). Check the headroom before loading a large data set ' +
      'or writing big files; sandbox figures are null while the session has no sandbox (paused, or not run yet).',
    inputSchema: SessionInputSchema,
    outputSchema: orError(SessionMetricsOutputSchema),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: 'list_services',
    title: 'List services',
    description: "The session's services: state (starting, running, stopped, exited, failed), exit code, ports.",
    inputSchema: SessionInputSchema,
    outputSchema: orError(ServiceListOutputSchema),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: 'service_logs',
    title: "Read a service's output",
    description:
      "A service's output (stdout and stderr together) from offset; pass next_offset back to get only what is new.",
    inputSchema: ServiceLogsInputSchema,
    outputSchema: orError(ServiceLogsOutputSchema),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: 'stop_service',
    title: 'Stop a service',
    description: 'Stop a service: SIGTERM, then SIGKILL after grace_ms (default 5000). Answers once it has ended.',
    inputSchema: ServiceInputSchema,
    outputSchema: orError(ServiceOutputSchema),
    annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
  },
  {
    name: 'revoke_previews',
    title: "Revoke a service's preview links",
    description:
      'Revoke every preview_url of the service handed out so far: none opens it again. The service keeps running; ' +
      'a link made later (a new start_service) works.',
    inputSchema: RevokePreviewsInputSchema,
    outputSchema: orError(RevokePreviewsOutputSchema),
    annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
  },
  {
    name: 'list_tools',
    title: "List the operator's tools",
    description:
      'The tools the operator offers this tenant (HTTP endpoints, remote MCP servers), with their JSON Schemas. ' +
      'Code in the sandbox calls them through `from sandgate import tools` (JS: `require("sandgate").tools`); ' +
      'call_tool calls one directly.',
    inputSchema: Type.Object({}, { additionalProperties: false }),
    outputSchema: orError(ListToolsOutputSchema),
    annotations: { readOnlyHint: true, openWorldHint: true },
  },
  {
    name: 'call_tool',
    title: "Call one of the operator's tools",
    description:
      'Call one tool list_tools shows, without starting a sandbox: for a request that is a single tool call.',
    inputSchema: CallToolInputSchema,
    outputSchema: orError(CallToolOutputSchema),
    annotations: { destructiveHint: false, openWorldHint: true },
  },
] as const satisfies readonly McpToolDefinition[];

export type McpToolName = (typeof MCP_TOOLS)[number]['name'];
