import { Type, type Static } from '@sinclair/typebox';
import { NextCursorSchema, SessionIdSchema, TimestampSchema, ref } from './common.ts';
import { UndoModeSchema } from './undo-mode.ts';
import { TemplateNameSchema } from './templates.ts';
import { MAX_SESSION_VOLUMES, MountVolumeSchema, VolumeMountSchema } from './volumes.ts';

export const SessionModeSchema = Type.Union([Type.Literal('process'), Type.Literal('stateful')], {
  description:
    '`process` (default): every execution is a new process in the session sandbox. `stateful`: a live Python ' +
    'interpreter keeps variables, imports and data between executions, like a notebook (python only).',
});
export type SessionMode = Static<typeof SessionModeSchema>;

export const SessionStateSchema = Type.Union([Type.Literal('idle'), Type.Literal('busy'), Type.Literal('paused')], {
  description:
    '`idle`: its sandbox is up, waiting for a run. `busy`: a run (or a pause, fork, snapshot …) holds it. `paused`: ' +
    "it has no sandbox (no memory, no CPU); its files (and a stateful session's variables) are kept, and its next " +
    'run, or POST /v1/sessions/{id}/resume, brings it back in a new sandbox.',
});

export const SessionSchema = Type.Object(
  {
    id: SessionIdSchema,
    mode: SessionModeSchema,
    state: SessionStateSchema,
    created_at: TimestampSchema,
    last_used_at: TimestampSchema,
    expires_at: Type.String({
      format: 'date-time',
      description: 'When the session is deleted, with its files, if it is not used before (paused or not).',
    }),
    ttl_seconds: Type.Integer({
      description: 'Its retention: how long it is kept unused before it is deleted; every use pushes expires_at.',
    }),
    current_execution_id: Type.Union([Type.String(), Type.Null()]),
    metadata: Type.Record(Type.String(), Type.String()),
    network: Type.Union([Type.Literal('none'), Type.Literal('egress')], {
      description:
        '`egress`: code in the session reaches the hosts its tenant is allowed (SANDGATE_EGRESS) through ' +
        "sandgate's egress proxy (HTTP_PROXY and HTTPS_PROXY are set). `none`: no network at all.",
    }),
    private: Type.Boolean({
      description:
        'The session holds private data (POST /v1/sessions/{id}/private, or an upload with private=true): it has ' +
        'no network for the rest of its life. Once true, never false again.',
    }),
    paused_at: Type.Union([TimestampSchema, Type.Null()], { description: 'When it was paused; null unless paused.' }),
    pauses_at: Type.Union([TimestampSchema, Type.Null()], {
      description: 'When it pauses by itself if left idle; null while paused.',
    }),
    idle_pause_seconds: Type.Integer({ description: 'Idle time after which it pauses by itself.' }),
    undo: UndoModeSchema,
    forked_from: Type.Union([SessionIdSchema, Type.Null()], {
      description: 'The session it is a copy of (POST /v1/sessions/{id}/fork, or a snapshot restored ?into=new).',
    }),
    template: Type.Union([Type.String(), Type.Null()], {
      description: 'The template its sandbox is made from (GET /v1/templates/{name}); null: the runtime image.',
    }),
    volumes: Type.Array(ref(VolumeMountSchema), { description: 'The volumes it mounts (POST /v1/volumes).' }),
  },
  { $id: 'Session', title: 'Session' },
);
export type Session = Static<typeof SessionSchema>;

export const CreateSessionSchema = Type.Object(
  {
    mode: Type.Optional(SessionModeSchema),
    ttl_seconds: Type.Optional(
      Type.Integer({
        minimum: 60,
        maximum: 366 * 86_400,
        description:
          "Retention: how long the session is kept unused (paused or not) before it is deleted; default the tenant's " +
          '(SANDGATE_SESSION_RETENTION_S, 7 days), which is also the most it may ask for.',
      }),
    ),
    idle_pause_seconds: Type.Optional(
      Type.Integer({
        minimum: 10,
        maximum: 366 * 86_400,
        description: 'Idle time after which it pauses by itself; default SANDGATE_SESSION_IDLE_PAUSE_S (300).',
      }),
    ),
    undo: Type.Optional(UndoModeSchema),
    metadata: Type.Optional(
      Type.Record(Type.String({ maxLength: 64 }), Type.String({ maxLength: 256 }), {
        maxProperties: 16,
        description: 'Free-form labels kept with the session.',
      }),
    ),
    template: Type.Optional(
      Type.Unsafe<string>({
        ...TemplateNameSchema,
        description:
          "The template of the session's sandbox (GET /v1/templates): its packages, files and environment, and its " +
          'limits unless a run gives its own. Default: the runtime image.',
      }),
    ),
    volumes: Type.Optional(
      Type.Array(ref(MountVolumeSchema), {
        maxItems: MAX_SESSION_VOLUMES,
        description:
          "The tenant's volumes to mount, for the session's life (default none). A volume has one writer at a time " +
          '(409 volume_in_use); readers are always allowed.',
      }),
    ),
  },
  { $id: 'CreateSession', title: 'CreateSession', additionalProperties: false },
);
export type CreateSession = Static<typeof CreateSessionSchema>;

export const SessionListSchema = Type.Object(
  {
    sessions: Type.Array(ref(SessionSchema), { description: 'Sessions (live and paused), newest first.' }),
    next_cursor: NextCursorSchema,
  },
  { $id: 'SessionList', title: 'SessionList' },
);
export type SessionList = Static<typeof SessionListSchema>;

export const SessionParamsSchema = Type.Object({ id: SessionIdSchema });
