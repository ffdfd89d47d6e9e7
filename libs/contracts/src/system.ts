import { Type, type Static } from '@sinclair/typebox';
import { ref } from './common.ts';

export const RuntimeSchema = Type.Object(
  {
    language: Type.String(),
    version: Type.String(),
    image: Type.String(),
    sandbox_runtime: Type.String({ description: 'Container runtime: runc or runsc (gVisor).' }),
  },
  { $id: 'Runtime', title: 'Runtime' },
);
export const RuntimeListSchema = Type.Object(
  {
    runtimes: Type.Array(ref(RuntimeSchema)),
    limits: Type.Object({
      max_code_bytes: Type.Integer(),
      max_upload_bytes: Type.Integer(),
      max_output_bytes: Type.Integer(),
      max_timeout_ms: Type.Integer(),
      memory_mb: Type.Integer(),
      cpus: Type.Number(),
    }),
  },
  { $id: 'RuntimeList', title: 'RuntimeList' },
);
export type Runtime = Static<typeof RuntimeSchema>;
export type RuntimeList = Static<typeof RuntimeListSchema>;

export const WebhookSecretSchema = Type.Object(
  {
    secret: Type.String({
      pattern: '^whsec_',
      description: "Standard Webhooks secret (whsec_ + base64) of this tenant's deliveries.",
    }),
  },
  { $id: 'WebhookSecret', title: 'WebhookSecret' },
);

export const HealthSchema = Type.Object(
  {
    status: Type.String(),
    checks: Type.Optional(
      Type.Record(Type.String(), Type.String(), {
        description:
          '/readyz: `redis` (`ok`), `workers` (live workers) and `workers_usable` (those whose backend can run ' +
          'sandboxes).',
      }),
    ),
  },
  { $id: 'Health', title: 'Health' },
);
export type Health = Static<typeof HealthSchema>;

/**
 * Whether a worker's execution backend can run sandboxes, as its last probe found (each heartbeat, every 5 s):
 * `unknown` until its first probe has answered.
 */
export const BACKEND_STATES = ['usable', 'unusable', 'unknown'] as const;
export type BackendState = (typeof BACKEND_STATES)[number];

const count = (description?: string) => Type.Integer({ minimum: 0, ...(description ? { description } : {}) });

/** GET /v1/system/stats: the numbers of /metrics as JSON, for the dashboard's operator view. */
export const SystemStatsSchema = Type.Object(
  {
    generated_at: Type.String({ format: 'date-time' }),
    queue: Type.Object(
      { waiting: count(), active: count(), delayed: count(), prioritized: count() },
      {
        description: 'BullMQ jobs by state, now.',
      },
    ),
    executions: Type.Object(
      {
        queued: count('Queued now.'),
        running: count('Running now.'),
        completed: count(),
        failed: count(),
        timeout: count(),
        cancelled: count(),
        error: count(),
      },
      {
        description:
          "Runs queued and running now, and runs ended by state since the deployment's Redis was first used.",
      },
    ),
    pool: Type.Object({
      hits: count('One-shots served by a warm sandbox.'),
      misses: count('One-shots that went cold.'),
      reused: count('Hits served by a sandbox reset after an earlier run of the same tenant.'),
      ready: count('Warm sandboxes ready now, over every live worker.'),
      templates: Type.Record(
        Type.String(),
        Type.Object({
          hits: count('One-shots of the template served by a sandbox of its pool.'),
          misses: count('One-shots of the template that went cold.'),
          reused: count('Hits served by a sandbox reset after an earlier run of the same tenant.'),
          ready: count("Sandboxes ready now in the template's pools, over every live worker."),
        }),
        {
          description:
            "Each template's warm pool, by template name (GET /v1/templates); the figures above count them too.",
        },
      ),
    }),
    sessions: Type.Object({
      live: count('Sessions whose idle TTL has not run out.'),
      sandboxes: count('Session sandboxes running, over every engine.'),
    }),
    sse_subscribers: count("Clients following an execution's events, over every live gateway."),
    workers: Type.Array(
      Type.Object({
        id: Type.String(),
        last_heartbeat_at: Type.String({ format: 'date-time' }),
        concurrency: count(),
        running: count(),
        taking_runs: Type.Boolean({
          description:
            'False while its backend is unusable and another live worker can run sandboxes: it leaves runs to them ' +
            'until its own backend answers again.',
        }),
        backend: Type.Object(
          {
            name: Type.String({ description: '`docker` or `kubernetes` (empty for a worker that does not say).' }),
            state: Type.Union(
              BACKEND_STATES.map((s) => Type.Literal(s)),
              { description: '`unknown` until its first probe has answered.' },
            ),
            reason: Type.Optional(
              Type.String({
                description: 'Why it is unusable, e.g. `engine unreachable: connect ENOENT /var/run/docker.sock`.',
              }),
            ),
          },
          {
            description:
              'Whether its execution backend can run sandboxes, as its last probe (the engine answers a ping, the ' +
              "Kubernetes API server a list of Pods) found. /readyz is ready only while some live worker's is usable.",
          },
        ),
      }),
      { description: 'Workers with a heartbeat in the last 15 s.' },
    ),
  },
  { $id: 'SystemStats', title: 'SystemStats' },
);
export type SystemStats = Static<typeof SystemStatsSchema>;
