import { Type, type Static } from '@sinclair/typebox';
import { TimestampSchema } from './common.ts';
import { SessionStateSchema } from './sessions.ts';

const Nullable = <T extends ReturnType<typeof Type.Integer> | ReturnType<typeof Type.Number>>(t: T) =>
  Type.Union([t, Type.Null()]);

/** GET /v1/sessions/{id}/metrics, and each `metrics` event of …/metrics/stream (docs/metrics.md). */
export const SessionMetricsSchema = Type.Object(
  {
    session_id: Type.String(),
    state: SessionStateSchema,
    sandbox: Type.Boolean({
      description:
        'Whether the session has a sandbox that answered: false while paused, before its first run, or after its ' +
        'sandbox ended (it comes back at the next run). Without one the sandbox figures are null.',
    }),
    sampled_at: TimestampSchema,
    cpu_percent: Nullable(
      Type.Number({
        minimum: 0,
        description:
          "CPU the sandbox used since the previous sample, in percent of one core (200: two cores' worth), as " +
          '`docker stats` shows it. Null without a sandbox, and on the first sample of a sandbox.',
      }),
    ),
    memory_bytes: Nullable(
      Type.Integer({ minimum: 0, description: "The sandbox cgroup's memory, less inactive file cache; null: none." }),
    ),
    memory_limit_bytes: Nullable(
      Type.Integer({ minimum: 0, description: "The sandbox cgroup's memory limit; null: no sandbox, or no limit." }),
    ),
    pids: Nullable(
      Type.Integer({ minimum: 0, description: 'Processes and threads in the sandbox now; null: no sandbox.' }),
    ),
    disk_bytes: Type.Integer({
      minimum: 0,
      description: "Bytes the session's files take: known with or without a sandbox (a paused session's too).",
    }),
    disk_limit_bytes: Nullable(
      Type.Integer({
        minimum: 0,
        description: "The session's disk quota (SANDGATE_SESSION_DISK_BYTES); null when none is enforced here.",
      }),
    ),
  },
  { $id: 'SessionMetrics', title: 'SessionMetrics' },
);
export type SessionMetrics = Static<typeof SessionMetricsSchema>;
