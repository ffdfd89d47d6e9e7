import { Type, type Static } from '@sinclair/typebox';
import {
  ExecutionIdSchema,
  NextCursorSchema,
  PageQuerySchema,
  SessionIdSchema,
  TimestampSchema,
  ref,
} from './common.ts';
import { ResumedEventSchema } from './session-lifecycle.ts';
import { InlineFileSchema } from './files.ts';
import { TemplateNameSchema } from './templates.ts';
import { JobVolumeSchema } from './volumes.ts';

export const LANGUAGES = ['python', 'javascript', 'typescript', 'bash'] as const;
export type Language = (typeof LANGUAGES)[number];
export const LanguageSchema = Type.String({
  description: `Language of \`code\`. This deployment's list is at GET /v1/runtimes (${LANGUAGES.join(', ')}).`,
  examples: ['python'],
});

export const TERMINAL_STATES = ['completed', 'failed', 'timeout', 'cancelled', 'error'] as const;
export type TerminalState = (typeof TERMINAL_STATES)[number];
export const ExecutionStateSchema = Type.Union([
  Type.Literal('queued'),
  Type.Literal('running'),
  Type.Literal('completed'),
  Type.Literal('failed'),
  Type.Literal('timeout'),
  Type.Literal('cancelled'),
  Type.Literal('error'),
]);
export type ExecutionState = Static<typeof ExecutionStateSchema>;
export const isTerminal = (s: string): s is TerminalState => (TERMINAL_STATES as readonly string[]).includes(s);

export const PHASES = ['queued', 'starting', 'running', 'harvesting', 'done'] as const;
export type Phase = (typeof PHASES)[number];

export const REASONS = [
  'oom',
  'timeout',
  'cancelled',
  'worker_lost',
  'backend_unavailable',
  'output_limit',
  'shutdown',
  'disk_quota',
  'pids_limit',
  'tests_not_run',
] as const;
export type Reason = (typeof REASONS)[number];

export const LimitsSchema = Type.Object(
  {
    memory_mb: Type.Optional(
      Type.Integer({ minimum: 16, description: 'Memory limit; capped by SANDGATE_MEMORY_LIMIT.' }),
    ),
    cpus: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'CPU limit; capped by SANDGATE_CPU_LIMIT.' })),
  },
  { $id: 'Limits', title: 'Limits', additionalProperties: false },
);
export type Limits = Static<typeof LimitsSchema>;

export const ArtifactSchema = Type.Object(
  {
    path: Type.String({ description: 'Path relative to the session root.' }),
    filename: Type.String(),
    size_bytes: Type.Integer(),
    mime_type: Type.String(),
    sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    download_url: Type.String(),
  },
  { $id: 'Artifact', title: 'Artifact' },
);
export type Artifact = Static<typeof ArtifactSchema>;

export const TestCaseSchema = Type.Object(
  {
    name: Type.String({
      description:
        "The test's name: pytest's id within the file (`test_add`, `TestCart::test_total`), or node:test's " +
        'suites and name joined with " > ".',
    }),
    passed: Type.Boolean(),
    skipped: Type.Boolean(),
    error: Type.Union([Type.String(), Type.Null()], {
      description: 'Why it failed (the assertion message), or why it was skipped; null when it passed.',
    }),
    duration_ms: Type.Number(),
  },
  {
    $id: 'TestCase',
    title: 'TestCase',
    examples: [{ name: 'test_add', passed: true, skipped: false, error: null, duration_ms: 0.4 }],
  },
);
export type TestCase = Static<typeof TestCaseSchema>;

export const TestReportSchema = Type.Object(
  {
    summary: Type.Object({
      total: Type.Integer(),
      passed: Type.Integer(),
      failed: Type.Integer(),
      skipped: Type.Integer(),
    }),
    results: Type.Array(ref(TestCaseSchema), { description: 'Every test, in the order they ended.' }),
    results_truncated: Type.Optional(
      Type.Boolean({
        description: 'Present (true) when more tests ran than are listed (past 1000); the summary counts all.',
      }),
    ),
  },
  { $id: 'TestReport', title: 'TestReport' },
);
export type TestReport = Static<typeof TestReportSchema>;

export const ToolCallRecordSchema = Type.Object(
  {
    name: Type.String({ description: 'The tool, as the code called it (`weather.get`).' }),
    ok: Type.Boolean(),
    error: Type.Optional(Type.String({ description: 'Why the call failed.' })),
    duration_ms: Type.Integer(),
  },
  { $id: 'ToolCallRecord', title: 'ToolCallRecord' },
);
export type ToolCallRecord = Static<typeof ToolCallRecordSchema>;

export const ExecutionResultSchema = Type.Object(
  {
    state: Type.Union(TERMINAL_STATES.map((s) => Type.Literal(s))),
    exit_code: Type.Integer({ description: '-1 when the run was killed on timeout or never ran.' }),
    stdout: Type.String(),
    stderr: Type.String(),
    stdout_truncated: Type.Boolean(),
    stderr_truncated: Type.Boolean(),
    artifacts: Type.Array(ref(ArtifactSchema)),
    artifacts_truncated: Type.Optional(
      Type.Boolean({
        description:
          'Present (true) when some files the run created or changed are not listed: past 1000 files, past ' +
          '4 GiB hashed in all, or past the 60 s the listing may take. They are in the session all the same.',
      }),
    ),
    duration_ms: Type.Integer(),
    reason: Type.Optional(Type.Union(REASONS.map((r) => Type.Literal(r)))),
    message: Type.Optional(Type.String({ description: 'Why the platform ended the run, for people.' })),
    value: Type.Optional(
      Type.String({ description: 'Stateful sessions: repr() of the value of the last expression, if any.' }),
    ),
    interpreter_restarted: Type.Optional(
      Type.Boolean({
        description: 'Stateful sessions: the interpreter was (re)started for this run, so earlier state is gone.',
      }),
    ),
    resumed: Type.Optional(ref(ResumedEventSchema)),
    tests: Type.Optional(ref(TestReportSchema)),
    tool_calls: Type.Optional(
      Type.Array(ref(ToolCallRecordSchema), {
        description:
          "The tools the run's code called (sandgate.tools), in order; their arguments and answers are in the events.",
      }),
    ),
  },
  { $id: 'ExecutionResult', title: 'ExecutionResult' },
);
export type ExecutionResult = Static<typeof ExecutionResultSchema>;

export const WebhookAttemptSchema = Type.Object(
  {
    at: TimestampSchema,
    status_code: Type.Union([Type.Integer(), Type.Null()], {
      description: "The receiver's HTTP status; null when none came.",
    }),
    error: Type.Optional(Type.String({ description: 'Why the attempt failed, when it did.' })),
    duration_ms: Type.Integer(),
  },
  { $id: 'WebhookAttempt', title: 'WebhookAttempt' },
);
export type WebhookAttempt = Static<typeof WebhookAttemptSchema>;

export const WebhookStatusSchema = Type.Object(
  {
    state: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')], {
      description:
        '`pending` until the run has ended and a delivery succeeded (`delivered`) or was given up (`failed`).',
    }),
    attempts: Type.Array(ref(WebhookAttemptSchema), { description: 'Every delivery attempt so far, oldest first.' }),
  },
  { $id: 'WebhookStatus', title: 'WebhookStatus' },
);
export type WebhookStatus = Static<typeof WebhookStatusSchema>;

export const ExecutionSchema = Type.Object(
  {
    id: ExecutionIdSchema,
    session_id: SessionIdSchema,
    language: Type.String(),
    state: ExecutionStateSchema,
    created_at: TimestampSchema,
    started_at: Type.Union([TimestampSchema, Type.Null()]),
    finished_at: Type.Union([TimestampSchema, Type.Null()]),
    timeout_ms: Type.Integer(),
    result: Type.Union([ref(ExecutionResultSchema), Type.Null()]),
    callback_url: Type.Union([Type.String(), Type.Null()], { description: 'Where the ended execution is POSTed.' }),
    webhook: Type.Union([ref(WebhookStatusSchema), Type.Null()], { description: 'Delivery to callback_url.' }),
    links: Type.Object({ self: Type.String(), events: Type.String(), cancel: Type.String(), session: Type.String() }),
  },
  { $id: 'Execution', title: 'Execution' },
);
export type Execution = Static<typeof ExecutionSchema>;

export const ExecutionListSchema = Type.Object(
  { executions: Type.Array(ref(ExecutionSchema), { description: 'Newest first.' }), next_cursor: NextCursorSchema },
  { $id: 'ExecutionList', title: 'ExecutionList' },
);
export type ExecutionList = Static<typeof ExecutionListSchema>;

export const CreateExecutionSchema = Type.Object(
  {
    session_id: Type.Optional(SessionIdSchema),
    language: Type.Optional(LanguageSchema),
    code: Type.Optional(
      Type.String({
        description: 'Source to run; at most SANDGATE_MAX_CODE_BYTES bytes (UTF-8). With `language`; or `script`.',
      }),
    ),
    mode: Type.Optional(
      Type.Union([Type.Literal('run'), Type.Literal('test')], {
        default: 'run',
        description:
          "`test` runs `tests` against `code` with the language's usual framework (pytest for python, node:test for " +
          'javascript and typescript): the implementation is the module `main` beside the tests (`from main import ' +
          "f`; `import { f } from './main.js'`). The result then has `tests`, and each test is a `test_result` event.",
      }),
    ),
    tests: Type.Optional(
      Type.String({
        description: 'Test mode: the tests, at most SANDGATE_MAX_CODE_BYTES bytes.',
        examples: ['from main import add\n\ndef test_add():\n    assert add(1, 2) == 3\n'],
      }),
    ),
    script: Type.Optional(
      Type.String({
        pattern: '^[a-z][a-z0-9_-]{0,62}$',
        description: 'Run the saved script of this name (POST /v1/scripts) instead of `code`; its language is its own.',
        examples: ['cpa-report'],
      }),
    ),
    keep_code: Type.Optional(
      Type.Boolean({
        description:
          "Keep this run's code for an hour after it completes, so that POST /v1/scripts can save it by " +
          'execution_id. Default false: code, env and stdin are kept no longer than the run.',
      }),
    ),
    args: Type.Optional(
      Type.Array(Type.String({ maxLength: 4096 }), {
        maxItems: 64,
        description:
          "Command-line arguments: Python's sys.argv[1:], Node's process.argv.slice(2) (JavaScript and TypeScript), " +
          "bash's $1….",
      }),
    ),
    timeout_ms: Type.Optional(
      Type.Integer({ minimum: 100, description: 'Wall-clock limit; capped by SANDGATE_EXEC_TIMEOUT_S.' }),
    ),
    template: Type.Optional(
      Type.Unsafe<string>({
        ...TemplateNameSchema,
        description:
          'A one-shot (no session_id) runs in a sandbox of this template (GET /v1/templates); default: the runtime ' +
          "image. A session's runs use the template the session was made with.",
      }),
    ),
    limits: Type.Optional(ref(LimitsSchema)),
    env: Type.Optional(
      Type.Record(Type.String(), Type.String({ maxLength: 32_768 }), {
        maxProperties: 64,
        description: 'Environment variables for the code. Names must match ^[A-Za-z_][A-Za-z0-9_]*$.',
      }),
    ),
    stdin: Type.Optional(Type.String({ description: 'Sent to the program on standard input.' })),
    files: Type.Optional(
      Type.Array(ref(InlineFileSchema), {
        maxItems: 32,
        description: 'Files written into the session before the code runs.',
      }),
    ),
    callback_url: Type.Optional(
      Type.String({
        format: 'uri',
        maxLength: 2048,
        pattern: '^https?://',
        description:
          'When the execution ends, it is POSTed here (as GET /v1/executions/{id} answers it), signed as ' +
          'Standard Webhooks do (webhook-id, webhook-timestamp, webhook-signature; the secret is at GET ' +
          '/v1/webhook-secret). Only to hosts the operator allows (SANDGATE_WEBHOOK_ALLOW).',
      }),
    ),
  },
  { $id: 'CreateExecution', title: 'CreateExecution', additionalProperties: false },
);
export type CreateExecution = Static<typeof CreateExecutionSchema>;

export const WaitQuerySchema = Type.Object({
  wait: Type.Optional(
    Type.Number({
      minimum: 0,
      maximum: 300,
      description: 'Seconds to block for the result; on expiry the 202 is returned.',
    }),
  ),
});

export const ExecutionListQuerySchema = Type.Object({
  session_id: Type.Optional(SessionIdSchema),
  state: Type.Optional(ExecutionStateSchema),
  ...PageQuerySchema.properties,
});

export const ExecutionParamsSchema = Type.Object({ id: ExecutionIdSchema });

const offset = (stream: string) =>
  Type.Optional(
    Type.Integer({
      minimum: 0,
      default: 0,
      description: `Bytes of ${stream} (UTF-8) already read: the ${stream}_offset a previous answer gave.`,
    }),
  );
export const OutputQuerySchema = Type.Object({
  stdout_offset: offset('stdout'),
  stderr_offset: offset('stderr'),
  max_bytes: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 1 << 20,
      default: 65536,
      description: 'At most this many bytes of each stream per answer.',
    }),
  ),
});
export type OutputQuery = Static<typeof OutputQuerySchema>;

/** What a polling client reads: the output since its offsets, and where to read from next. */
export const ExecutionOutputSchema = Type.Object(
  {
    execution_id: ExecutionIdSchema,
    state: ExecutionStateSchema,
    ended: Type.Boolean({ description: 'The run has ended: once the offsets stop moving, nothing more will come.' }),
    stdout: Type.String(),
    stderr: Type.String(),
    stdout_offset: Type.Integer({ description: 'Pass back as stdout_offset for what comes next.' }),
    stderr_offset: Type.Integer({ description: 'Pass back as stderr_offset for what comes next.' }),
  },
  { $id: 'ExecutionOutput', title: 'ExecutionOutput' },
);
export type ExecutionOutput = Static<typeof ExecutionOutputSchema>;

/**
 * Where a run happens: `oneshot` in a fresh sandbox (from the warm pool when one is ready) that is
 * removed afterwards; `session` as a new process in the session's long-lived sandbox; `stateful` in
 * the session's live Python interpreter, whose variables persist between runs.
 */
export const SandboxKindSchema = Type.Union([
  Type.Literal('oneshot'),
  Type.Literal('session'),
  Type.Literal('stateful'),
]);

/**
 * What the queue carries: ids only. The worker reads the run's spec (an ExecutionJob) from the execution record,
 * which drops it when the run ends, so code, env and stdin are kept no longer than the run.
 */
export const QueuedExecutionSchema = Type.Object(
  { execution_id: ExecutionIdSchema, tenant: Type.String() },
  { $id: 'QueuedExecution', title: 'QueuedExecution' },
);
export type QueuedExecution = Static<typeof QueuedExecutionSchema>;

/** What a backend runs: the spec of one execution. Files are already in the session directory. */
export const ExecutionJobSchema = Type.Object(
  {
    execution_id: ExecutionIdSchema,
    tenant: Type.String(),
    session_id: SessionIdSchema,
    language: Type.Union(LANGUAGES.map((l) => Type.Literal(l))),
    code: Type.String(),
    timeout_ms: Type.Integer(),
    memory_mb: Type.Integer(),
    cpus: Type.Number(),
    env: Type.Record(Type.String(), Type.String()),
    stdin: Type.Union([Type.String(), Type.Null()]),
    sandbox: SandboxKindSchema,
    /** Command-line arguments of the program (absent: none). */
    args: Type.Optional(Type.Array(Type.String())),
    /** Test mode: run `tests` against `code` (sandgate-test in the runtime image). */
    mode: Type.Optional(Type.Literal('test')),
    tests: Type.Optional(Type.String()),
    /** The client asked to keep the code of this run, if it completes, so that it can be saved as a script. */
    keep_code: Type.Optional(Type.Boolean()),
    /** Bumped by POST /v1/sessions/:id/restart: a session sandbox of an older generation is replaced. */
    generation: Type.Integer({ minimum: 0 }),
    /** The session's sandbox reaches its tenant's allowed hosts through the egress proxy (absent: no network). */
    network: Type.Optional(Type.Literal('egress')),
    /** The run starts `code` as the session's service of this name (POST /v1/sessions/:id/services) and ends then. */
    service: Type.Optional(Type.String()),
    /** The session was paused (at this time, ms) when the run was queued: the run brings it back and says so. */
    paused_at: Type.Optional(Type.Integer()),
    /** Keep an undo step before the run: the session's files (`files`), and its interpreter's variables (`state`). */
    undo: Type.Optional(Type.Union([Type.Literal('files'), Type.Literal('state')])),
    /**
     * The template its sandbox is made from, and that template's image as the gateway resolved it when the run (or
     * its session) was made: a worker never looks a template up. Absent: the runtime image (SANDGATE_IMAGE).
     */
    template: Type.Optional(Type.String()),
    image: Type.Optional(Type.String()),
    /** The volumes the session mounts (absent: none). */
    volumes: Type.Optional(Type.Array(JobVolumeSchema)),
  },
  { $id: 'ExecutionJob', title: 'ExecutionJob' },
);
export type ExecutionJob = Static<typeof ExecutionJobSchema>;
