import { Type, type Static } from '@sinclair/typebox';
import { ExecutionIdSchema, SessionIdSchema, TimestampSchema, ref } from './common.ts';

export const SERVICE_NAME_PATTERN = '^[a-z][a-z0-9-]{0,31}$';
export const ServiceNameSchema = Type.String({
  pattern: SERVICE_NAME_PATTERN,
  description: 'Lower-case letters, digits and dashes, starting with a letter; at most 32 characters.',
  examples: ['web'],
});

export const StartServiceSchema = Type.Object(
  {
    name: ServiceNameSchema,
    command: Type.String({
      minLength: 1,
      maxLength: 65_536,
      description:
        'A bash command, run in /mnt/data as the sandbox user, e.g. "python3 -m http.server 8000". It should not ' +
        "daemonize: processes that leave the service's session end with the next execution.",
    }),
    env: Type.Optional(
      Type.Record(Type.String(), Type.String(), {
        maxProperties: 64,
        description: 'Environment variables of the service.',
      }),
    ),
    port: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 65_535,
        description: 'The port the proxy forwards to; absent: the first port the service listens on.',
      }),
    ),
  },
  { $id: 'StartService', title: 'StartService', additionalProperties: false },
);
export type StartService = Static<typeof StartServiceSchema>;

export const ServiceStateSchema = Type.Union(
  ['starting', 'running', 'stopped', 'exited', 'failed'].map((s) => Type.Literal(s)),
  {
    description:
      "`starting`: queued behind the session's current execution, or being started. `running`. `stopped`: by " +
      "POST .../stop, or with the session's sandbox (a restart, a change of limits or network). `exited`: it ended " +
      'with status 0. `failed`: it could not start, or ended with another status.',
  },
);

export const ServiceSchema = Type.Object(
  {
    name: ServiceNameSchema,
    session_id: SessionIdSchema,
    state: ServiceStateSchema,
    command: Type.String(),
    /** The execution that started it (its output holds any error from the start). */
    execution_id: ExecutionIdSchema,
    exit_code: Type.Union([Type.Integer(), Type.Null()], { description: 'Once it has ended.' }),
    ports: Type.Array(Type.Integer(), {
      description: 'Ports it listens on, as the sandbox sees them (detected while it runs).',
    }),
    port: Type.Union([Type.Integer(), Type.Null()], {
      description: 'The port the proxy forwards to: the one given at start, else the first detected.',
    }),
    proxy_url: Type.String({
      description: 'HTTP and websockets to the service, with the same API key as the rest of the API.',
    }),
    created_at: TimestampSchema,
    started_at: Type.Union([TimestampSchema, Type.Null()]),
    ended_at: Type.Union([TimestampSchema, Type.Null()]),
    log_bytes: Type.Integer({ description: 'Bytes of output it has written so far (stdout and stderr together).' }),
    message: Type.Union([Type.String(), Type.Null()], { description: 'Why it is stopped or failed.' }),
  },
  { $id: 'Service', title: 'Service' },
);
export type Service = Static<typeof ServiceSchema>;

export const ServiceListSchema = Type.Object(
  { services: Type.Array(ref(ServiceSchema)) },
  { $id: 'ServiceList', title: 'ServiceList' },
);
export type ServiceList = Static<typeof ServiceListSchema>;

export const ServiceLogsSchema = Type.Object(
  {
    output: Type.String({ description: 'Output from `offset` (stdout and stderr together), UTF-8 decoded.' }),
    offset: Type.Integer({
      description:
        'Where `output` starts. Larger than the offset asked for when that output no longer is kept (the last ' +
        'MiB of each service is).',
    }),
    next_offset: Type.Integer({ description: 'Pass as `offset` to get what comes next.' }),
    state: ServiceStateSchema,
  },
  { $id: 'ServiceLogs', title: 'ServiceLogs' },
);
export type ServiceLogs = Static<typeof ServiceLogsSchema>;

export const StopServiceSchema = Type.Object(
  {
    grace_ms: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 60_000,
        default: 5000,
        description: 'Time between SIGTERM and SIGKILL.',
      }),
    ),
  },
  { $id: 'StopService', title: 'StopService', additionalProperties: false },
);

export const SharePreviewSchema = Type.Object(
  {
    ttl_seconds: Type.Optional(
      Type.Integer({ minimum: 60, maximum: 7 * 86_400, default: 3600, description: 'How long the link works.' }),
    ),
  },
  { $id: 'SharePreview', title: 'SharePreview', additionalProperties: false },
);

export const ServicePreviewSchema = Type.Object(
  {
    url: Type.String({
      description:
        'Opens this start of the service without an API key until expires_at, or until its links are revoked ' +
        '(DELETE …/preview): for a browser, or to share. Under /preview/ on the gateway, pages are served sandboxed ' +
        '(Content-Security-Policy: sandbox, an opaque origin); where the deployment sets SANDGATE_PREVIEW_ORIGIN, ' +
        'the link is a host of its own with the service at its root.',
    }),
    expires_at: TimestampSchema,
  },
  { $id: 'ServicePreview', title: 'ServicePreview' },
);
export type ServicePreview = Static<typeof ServicePreviewSchema>;

export const ServiceParamsSchema = Type.Object({ id: SessionIdSchema, name: ServiceNameSchema });
