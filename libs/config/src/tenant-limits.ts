import { Type, type Static } from '@sinclair/typebox';

const count = (description: string) => Type.Integer({ minimum: 0, description: `${description}; 0: no limit` });

/** What one tenant may do at once and per minute. Defaults come from SANDGATE_TENANT_*, overrides per tenant. */
export const TenantLimitsSchema = Type.Object(
  {
    max_running: count('executions running at once'),
    max_queued: count('executions waiting beyond max_running'),
    runs_per_min: count('executions created per minute'),
    uploads_per_min: count('file uploads per minute'),
    requests_per_min: count('requests per minute'),
    storage_bytes: count("bytes of files over all the tenant's sessions (uploads and what runs write)"),
    session_retention_s: Type.Integer({
      minimum: 1,
      description: "how long the tenant's unused sessions are kept (and the most a session may ask for)",
    }),
  },
  { additionalProperties: false },
);
export type TenantLimits = Static<typeof TenantLimitsSchema>;

/** SANDGATE_TENANT_LIMITS: `{ "<tenant>": { "max_running": 4, ... } }`, any subset of the fields per tenant. */
export const TenantOverridesSchema = Type.Record(
  Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$' }),
  Type.Partial(TenantLimitsSchema),
);
export type TenantOverrides = Static<typeof TenantOverridesSchema>;

interface LimitsConfig {
  tenantMaxRunning: number;
  tenantMaxQueued: number;
  tenantRunsPerMin: number;
  tenantUploadsPerMin: number;
  rateLimitPerMin: number;
  tenantStorageBytes: number;
  sessionTtlSeconds: number;
  tenantLimits: TenantOverrides;
}

/** The limits of `tenant`: its overrides over the deployment's defaults. */
export function limitsFor(config: LimitsConfig, tenant: string): TenantLimits {
  return {
    max_running: config.tenantMaxRunning,
    max_queued: config.tenantMaxQueued,
    runs_per_min: config.tenantRunsPerMin,
    uploads_per_min: config.tenantUploadsPerMin,
    requests_per_min: config.rateLimitPerMin,
    storage_bytes: config.tenantStorageBytes,
    session_retention_s: config.sessionTtlSeconds,
    ...config.tenantLimits[tenant],
  };
}

/** Runs a tenant may have queued or running at once: max_running + max_queued, or 0 (no limit) when either is. */
export const maxInFlight = (l: TenantLimits) =>
  l.max_running > 0 && l.max_queued > 0 ? l.max_running + l.max_queued : 0;
