import { isIPv4, isIPv6 } from 'node:net';
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { EgressRegistrySchema } from './egress.ts';
import { ToolRegistrySchema } from './tools.ts';
import { TenantOverridesSchema } from './tenant-limits.ts';
import { readTemplatesFile, TenantTemplatesSchema } from './templates.ts';
import type { TemplateRecipe } from '@sandgate/contracts';

/**
 * SANDGATE_PREVIEW_ORIGIN, parsed: `<scheme>://{preview}.<base>[:<port>]`. Each preview link is the origin
 * `<scheme>://<token>.<base>[:<port>]`, its token a DNS label (apps/gateway/src/preview-links.ts).
 */
export const PreviewOriginSchema = Type.Object({
  scheme: Type.Union([Type.Literal('http'), Type.Literal('https')]),
  /** The domain every preview host is one label under, lower-case. */
  base: Type.String({ minLength: 1 }),
  /** The port of the links, '' for the scheme's default. Hosts are matched by name whatever the port. */
  port: Type.String({ pattern: '^(\\d{1,5})?$' }),
});
export type PreviewOrigin = Static<typeof PreviewOriginSchema>;

/** One sentinel's address. */
export const RedisSentinelSchema = Type.Object({
  host: Type.String({ minLength: 1 }),
  port: Type.Integer({ minimum: 1, maximum: 65535 }),
});
export type RedisSentinel = Static<typeof RedisSentinelSchema>;

const HOST_NAME = /^[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?$/;

/**
 * SANDGATE_REDIS_SENTINELS: `host:port,host:port,…` (the port defaults to 26379; an IPv6 address in brackets, as in
 * a URL) → the sentinels; a string says what is wrong. Empty: none (no Sentinel).
 */
export const parseSentinels = (raw: string): RedisSentinel[] | string => {
  const out: RedisSentinel[] = [];
  for (const item of raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(item);
    const host = m?.[1] ?? m?.[2];
    if (!m || host === undefined) return `"${item}" is not host:port (an IPv6 address goes in brackets: [::1]:26379)`;
    if (m[1] !== undefined ? !isIPv6(host) : !isIPv4(host) && !HOST_NAME.test(host)) {
      return `"${host}" is not a host name or IP address`;
    }
    const port = m[3] === undefined ? 26379 : Number(m[3]);
    if (port < 1 || port > 65535) return `port ${m[3]} of "${item}" is out of range`;
    if (out.some((s) => s.host === host && s.port === port)) return `"${item}" is listed twice`;
    out.push({ host, port });
  }
  return out;
};

const DOMAIN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** SANDGATE_PREVIEW_ORIGIN → its parts; a string says what is wrong with it. */
export const parsePreviewOrigin = (raw: string): PreviewOrigin | null | string => {
  if (raw.trim() === '') return null;
  const m = /^(https?):\/\/\{preview\}\.([^/:]+)(?::(\d{1,5}))?\/?$/i.exec(raw.trim());
  if (!m) return `"${raw}" is not <scheme>://{preview}.<domain>[:<port>], e.g. https://{preview}.previews.example.com`;
  const base = m[2]!.toLowerCase();
  if (!DOMAIN.test(base) || /^[\d.]+$/.test(base)) return `"${base}" is not a domain name preview hosts can be under`;
  if (m[3] !== undefined && (Number(m[3]) < 1 || Number(m[3]) > 65535)) return `port ${m[3]} is out of range`;
  return { scheme: m[1]!.toLowerCase() as 'http' | 'https', base, port: m[3] ?? '' };
};

/** The preview token a host name (with or without a port) carries: its one label under the base; else undefined. */
export const previewLabelOf = (origin: PreviewOrigin, host: string | undefined): string | undefined => {
  const name = (host ?? '').toLowerCase().replace(/:\d+$/, '');
  const suffix = `.${origin.base}`;
  const label = name.endsWith(suffix) ? name.slice(0, -suffix.length) : '';
  return label !== '' && !label.includes('.') ? label : undefined;
};

/**
 * The one schema of sandgate's configuration, read once from the environment at start-up.
 * Every process (gateway, worker, standalone) reads the same variables; each uses what it needs.
 */
export const ConfigSchema = Type.Object({
  /** Redis's URL; with sentinels, only its credentials and database number are used (the primary is asked for). */
  redisUrl: Type.String({ pattern: '^rediss?://' }),
  /** Redis Sentinel: the sentinels to ask for the primary's address; empty: connect to redisUrl itself. */
  redisSentinels: Type.Array(RedisSentinelSchema),
  /** The name the sentinels monitor the primary under (`sentinel monitor <name> …`). */
  redisSentinelName: Type.String({ pattern: '^[A-Za-z0-9_.:-]{1,128}$' }),
  /** The sentinels' own password (their `requirepass`), when they have one; null: none. */
  redisSentinelPassword: Type.Union([Type.String({ minLength: 1 }), Type.Null()]),
  redisPrefix: Type.String({ pattern: '^[A-Za-z0-9_.-]{1,32}$' }),
  queueName: Type.String({ pattern: '^[A-Za-z0-9_.-]{1,64}$' }),
  /** Where sandboxes run: the local Docker engine, or Pods of a Kubernetes cluster (docs/kubernetes.md). */
  backend: Type.Union([Type.Literal('docker'), Type.Literal('kubernetes')]),
  /** Docker: the engine's Unix socket; null: DOCKER_HOST, else the local socket (/var/run/docker.sock). */
  dockerSocket: Type.Union([Type.String({ pattern: '^/' }), Type.Null()]),
  /** Kubernetes: the namespace sandbox Pods are made in. */
  k8sNamespace: Type.String({ pattern: '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$' }),
  /** Kubernetes: the RuntimeClass of sandbox Pods (e.g. gvisor); null: the cluster's default runtime. */
  k8sRuntimeClass: Type.Union([Type.String({ pattern: '^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$' }), Type.Null()]),
  /** Kubernetes: the gateway's URL as sandbox Pods reach it (their files go through it, never a shared path). */
  k8sGatewayUrl: Type.Union([Type.String({ pattern: '^https?://[^/]+(/.*[^/])?$' }), Type.Null()]),
  /** Kubernetes: the image of the stage and harvest containers; null: the runtime image, which has what they need. */
  k8sHelperImage: Type.Union([Type.String({ minLength: 1 }), Type.Null()]),
  /** Kubernetes: how long a sandbox Pod may take to start its runner (scheduling, image pull, stage). */
  k8sStartupTimeoutMs: Type.Integer({ minimum: 1000 }),
  /** Kubernetes: how long stage and harvest wait on the gateway (connecting, or any read or write of a transfer). */
  k8sTransferTimeoutS: Type.Integer({ minimum: 1, maximum: 3600 }),
  /**
   * Kubernetes: the share of a sandbox's CPU limit its Pod requests (what the scheduler reserves on a node; the limit
   * is what the container's cgroup enforces). 1: requests equal limits.
   */
  k8sCpuRequestRatio: Type.Number({ exclusiveMinimum: 0, maximum: 1 }),
  /** Kubernetes: the port session Pods' agents listen on (the chart's NetworkPolicy admits worker Pods to it). */
  k8sAgentPort: Type.Integer({ minimum: 1024, maximum: 65535 }),
  /** Kubernetes: the port session Pods' agents serve services on (the chart's NetworkPolicy admits gateways to it). */
  k8sServicesPort: Type.Integer({ minimum: 1024, maximum: 65535 }),
  /** Kubernetes: the port a session Pod's volumes container serves its volumes' files on (for the worker only). */
  k8sVolumesPort: Type.Integer({ minimum: 1024, maximum: 65535 }),
  /** Kubernetes: a kubeconfig file; null: the in-cluster service account, or $KUBECONFIG. */
  k8sKubeconfig: Type.Union([Type.String({ pattern: '^/' }), Type.Null()]),
  image: Type.String({ minLength: 1 }),
  runtime: Type.Union([Type.Literal('runc'), Type.Literal('runsc')]),
  memoryMb: Type.Integer({ minimum: 16 }),
  cpus: Type.Number({ exclusiveMinimum: 0, maximum: 64 }),
  pidsLimit: Type.Integer({ minimum: 8 }),
  execTimeoutMs: Type.Integer({ minimum: 1000 }),
  /** A session's retention: kept this long unused (paused or not), then deleted (SANDGATE_SESSION_RETENTION_S). */
  sessionTtlSeconds: Type.Integer({ minimum: 1 }),
  /** Idle seconds after which a live session pauses by itself. */
  sessionIdlePauseSeconds: Type.Integer({ minimum: 1 }),
  /** Snapshots a session may keep. */
  maxSnapshots: Type.Integer({ minimum: 0, maximum: 1000 }),
  /** Terminals a session may have open at once (GET /v1/sessions/{id}/terminal); 0: no terminals. */
  maxTerminals: Type.Integer({ minimum: 0, maximum: 64 }),
  /** Metric streams (GET /v1/sessions/{id}/metrics/stream) a session may have open at once, per gateway. */
  maxMetricStreamsPerSession: Type.Integer({ minimum: 0, maximum: 1000 }),
  /** Metric streams a tenant may have open at once over all its sessions, per gateway. */
  maxMetricStreamsPerTenant: Type.Integer({ minimum: 0, maximum: 10_000 }),
  /** Seconds between samples of the deployment's figures kept for the last hour (GET /v1/system/stats/history). */
  statsHistorySeconds: Type.Integer({ minimum: 1, maximum: 600 }),
  /** File events (GET /v1/sessions/{id}/files/events): a file's changes within this are one event. */
  fileEventsIntervalMs: Type.Integer({ minimum: 10, maximum: 10_000 }),
  /** Files that may change within one interval before the sandbox's events give way to an `overflow` event. */
  fileEventsMaxPerInterval: Type.Integer({ minimum: 1, maximum: 100_000 }),
  /** Directories of a session the sandbox watches at most (past it: `overflow`). */
  fileEventsMaxWatches: Type.Integer({ minimum: 1, maximum: 65_536 }),
  /** File events kept per session for Last-Event-ID. */
  fileEventsKeep: Type.Integer({ minimum: 10, maximum: 100_000 }),
  /** Seconds a session's file events are kept after its last one. */
  fileEventsTtlSeconds: Type.Integer({ minimum: 1 }),
  /** Undo steps kept per session (the runs that can be undone); 0: no undo. */
  undoDepth: Type.Integer({ minimum: 0, maximum: 100 }),
  /** The most a stateful session's saved variables may take. */
  maxStateBytes: Type.Integer({ minimum: 1 }),
  /** How long saving a stateful session's variables may take at a pause, a fork or a snapshot. */
  stateSaveTimeoutMs: Type.Integer({ minimum: 1 }),
  maxSessions: Type.Integer({ minimum: 1 }),
  maxUploadBytes: Type.Integer({ minimum: 1 }),
  /** Per-session disk quota (btrfs data directory); 0: none. */
  sessionDiskBytes: Type.Integer({ minimum: 0 }),
  maxArtifactReadBytes: Type.Integer({ minimum: 1 }),
  maxOutputBytes: Type.Integer({ minimum: 1024 }),
  maxCodeBytes: Type.Integer({ minimum: 1 }),
  /** Volumes per tenant (POST /v1/volumes). */
  maxVolumes: Type.Integer({ minimum: 0 }),
  /** The largest size a volume may be made with. */
  maxVolumeBytes: Type.Integer({ minimum: 1 << 20 }),
  /** Saved scripts per tenant (POST /v1/scripts). */
  maxScripts: Type.Integer({ minimum: 0 }),
  dataDir: Type.String({ pattern: '^/' }),
  host: Type.String({ minLength: 1 }),
  port: Type.Integer({ minimum: 0, maximum: 65535 }),
  publicUrl: Type.String({ pattern: '^https?://[^/]+(/.*[^/])?$' }),
  logLevel: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))),
  apiKeys: Type.Record(Type.String(), Type.String()),
  signingKey: Type.Union([Type.String({ minLength: 32 }), Type.Null()]),
  downloadUrlTtlSeconds: Type.Integer({ minimum: 60 }),
  retentionSeconds: Type.Integer({ minimum: 60 }),
  workerConcurrency: Type.Integer({ minimum: 1, maximum: 256 }),
  poolSize: Type.Integer({ minimum: 0, maximum: 64 }),
  poolMaxRuns: Type.Integer({ minimum: 1, maximum: 10_000 }),
  sandboxUid: Type.Integer({ minimum: 1 }),
  leaseMs: Type.Integer({ minimum: 1000 }),
  sweepIntervalMs: Type.Integer({ minimum: 1000 }),
  tenantMaxRunning: Type.Integer({ minimum: 0 }),
  tenantMaxQueued: Type.Integer({ minimum: 0 }),
  tenantRunsPerMin: Type.Integer({ minimum: 0 }),
  tenantUploadsPerMin: Type.Integer({ minimum: 0 }),
  tenantStorageBytes: Type.Integer({ minimum: 0 }),
  /** Uploads are refused while the data directory has less free space than this. */
  minFreeBytes: Type.Integer({ minimum: 0 }),
  rateLimitPerMin: Type.Integer({ minimum: 0 }),
  tenantLimits: TenantOverridesSchema,
  /** Tools sandboxed code may call, per tenant (libs/config/src/tools.ts). */
  tools: ToolRegistrySchema,
  toolMaxCalls: Type.Integer({ minimum: 1 }),
  toolTimeoutMs: Type.Integer({ minimum: 100 }),
  toolMaxResponseBytes: Type.Integer({ minimum: 1 }),
  /** Hosts each tenant's session sandboxes may reach through the egress proxy (libs/config/src/egress.ts). */
  egress: EgressRegistrySchema,
  /** Connections one session's sandbox may hold open through the egress proxy at once. */
  egressMaxConnections: Type.Integer({ minimum: 1 }),
  /** Host names (with an optional :port) the gateway answers to besides the public URL's and loopback's. */
  allowedHosts: Type.Array(Type.String({ pattern: '^[A-Za-z0-9.-]+(:\\d{1,5})?$|^\\[[0-9A-Fa-f:.]+\\](:\\d{1,5})?$' })),
  operatorKeys: Type.Array(Type.String({ minLength: 16 })),
  metricsPort: Type.Union([Type.Integer({ minimum: 0, maximum: 65535 }), Type.Null()]),
  metricsHost: Type.String({ minLength: 1 }),
  requestTimeoutMs: Type.Integer({ minimum: 1000 }),
  shutdownGraceMs: Type.Integer({ minimum: 0 }),
  logFormat: Type.Union([Type.Literal('json'), Type.Literal('pretty'), Type.Null()]),
  /** Where callback_url may point (host names, `*.domain`, `*`, IPs and CIDRs); empty: no webhooks. */
  webhookAllow: Type.Array(Type.String({ minLength: 1 })),
  webhookAttempts: Type.Integer({ minimum: 1, maximum: 30 }),
  webhookBackoffMs: Type.Integer({ minimum: 10 }),
  webhookTimeoutMs: Type.Integer({ minimum: 100 }),
  /** The templates file (JSON or YAML) the templates below were read from; null: none. */
  templatesFile: Type.Union([Type.String({ pattern: '^/' }), Type.Null()]),
  /** The operator's templates from that file, checked (libs/config/src/templates.ts). */
  templates: Type.Array(Type.Unsafe<TemplateRecipe>(Type.Any())),
  /** The templates each tenant may use (libs/config/src/templates.ts); a tenant without an entry: all. */
  tenantTemplates: TenantTemplatesSchema,
  /** Docker template builds: a directory of wheels on the worker's host, pip's --find-links. */
  templateWheelsDir: Type.Union([Type.String({ pattern: '^/' }), Type.Null()]),
  /** Docker template builds: bytes the wheels directory may hold (it goes into each build that installs from it). */
  templateWheelsMaxBytes: Type.Integer({ minimum: 0 }),
  /** Docker template builds: pip's index; null: none (the wheels directory only). */
  templatePipIndexUrl: Type.Union([Type.String({ pattern: '^https?://' }), Type.Null()]),
  /** Docker template builds: the npm registry. */
  templateNpmRegistry: Type.String({ pattern: '^https?://' }),
  /** Docker template builds: a CA bundle (PEM) pip and npm trust, e.g. a TLS-inspecting proxy's; null: the image's. */
  templateCaFile: Type.Union([Type.String({ pattern: '^/' }), Type.Null()]),
  templateBuildTimeoutMs: Type.Integer({ minimum: 10_000 }),
  /** Bytes of a build's log kept and streamed; past them only its end is kept. */
  templateLogBytes: Type.Integer({ minimum: 4096 }),
  /** Bytes of all of one recipe's files. */
  templateMaxFileBytes: Type.Integer({ minimum: 0 }),
  maxTemplates: Type.Integer({ minimum: 0, maximum: 10_000 }),
  /** Origins (scheme://host[:port]) whose web pages may call the API from a browser (CORS). */
  corsOrigins: Type.Array(Type.String({ pattern: '^https?://([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\])(:\\d{1,5})?$' })),
  /** Where previews are served from an origin of their own (SANDGATE_PREVIEW_ORIGIN); null: under /preview/. */
  previewOrigin: Type.Union([PreviewOriginSchema, Type.Null()]),
});
export type Config = Static<typeof ConfigSchema>;

type Env = Record<string, string | undefined>;
type Parse = (raw: string) => unknown;

const int: Parse = (raw) => (/^-?\d+$/.test(raw.trim()) ? Number(raw) : NaN);
const num: Parse = (raw) => (raw.trim() === '' ? NaN : Number(raw));
const str: Parse = (raw) => raw;
const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1000,
  kib: 1024,
  m: 1 << 20,
  mb: 1e6,
  mib: 1 << 20,
  g: 1 << 30,
  gb: 1e9,
  gib: 1 << 30,
};
/** '512m', '50MB', '100 KiB', '1048576' → bytes. */
export const parseBytes = (raw: string): number => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(raw);
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
  return m && unit !== undefined ? Math.round(Number(m[1]) * unit) : NaN;
};
/** 'key1:tenantA,key2:tenantB' → { key1: 'tenantA', ... }. */
export const parseApiKeys = (raw: string): Record<string, string> | string => {
  const keys: Record<string, string> = {};
  for (const item of raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const i = item.lastIndexOf(':');
    const key = item.slice(0, i);
    const tenant = item.slice(i + 1);
    if (i <= 0 || !/^[A-Za-z0-9_-]{1,64}$/.test(tenant)) return `"${item.slice(0, 4)}…" is not key:tenant`;
    if (key.length < 16) return `a key for tenant "${tenant}" is shorter than 16 characters`;
    keys[key] = tenant;
  }
  return keys;
};

/** 'k1,k2' → ['k1', 'k2']: bearer keys that may read the operator endpoints (/metrics, /v1/system/stats). */
export const parseOperatorKeys = (raw: string): string[] | string => {
  const keys = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  // The message never quotes a key: configuration errors are printed and logged.
  const short = keys.findIndex((k) => k.length < 16);
  return short < 0 ? keys : `operator key #${short + 1} is shorter than 16 characters`;
};
const seconds: Parse = (raw) => Math.round(Number(num(raw)) * 1000);
/** A JSON object; a string says why it is not one. */
export const parseJsonObject = (raw: string): Record<string, unknown> | string => {
  try {
    const v: unknown = JSON.parse(raw);
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'is not a JSON object';
    return v as Record<string, unknown>;
  } catch (err) {
    return `is not JSON (${(err as Error).message})`;
  }
};
const list: Parse = (raw) =>
  raw
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
/** Parsers whose string answer is a problem, not a value. */
const STRUCTURED = new Set<Parse>([
  parseApiKeys,
  parseOperatorKeys,
  parseJsonObject,
  parsePreviewOrigin,
  parseSentinels,
]);

/** variable → [config field, parser, default]. */
const VARS: Record<string, [keyof Config, Parse, string | null]> = {
  REDIS_URL: ['redisUrl', str, 'redis://127.0.0.1:6379'],
  SANDGATE_REDIS_SENTINELS: ['redisSentinels', parseSentinels, ''],
  SANDGATE_REDIS_SENTINEL_NAME: ['redisSentinelName', str, 'mymaster'],
  SANDGATE_REDIS_SENTINEL_PASSWORD: ['redisSentinelPassword', (r) => (r === '' ? null : r), null],
  SANDGATE_REDIS_PREFIX: ['redisPrefix', str, 'sandgate'],
  SANDGATE_QUEUE: ['queueName', str, 'executions'],
  SANDGATE_BACKEND: ['backend', str, 'docker'],
  SANDGATE_DOCKER_SOCKET: ['dockerSocket', str, null],
  SANDGATE_K8S_NAMESPACE: ['k8sNamespace', str, 'sandgate'],
  SANDGATE_K8S_RUNTIME_CLASS: ['k8sRuntimeClass', (r) => (r.trim() === '' ? null : r), null],
  SANDGATE_K8S_GATEWAY_URL: ['k8sGatewayUrl', str, null],
  SANDGATE_K8S_HELPER_IMAGE: ['k8sHelperImage', (r) => (r.trim() === '' ? null : r), null],
  SANDGATE_K8S_KUBECONFIG: ['k8sKubeconfig', str, null],
  SANDGATE_K8S_STARTUP_TIMEOUT_S: ['k8sStartupTimeoutMs', seconds, '180'],
  SANDGATE_K8S_TRANSFER_TIMEOUT_S: ['k8sTransferTimeoutS', int, '60'],
  SANDGATE_K8S_CPU_REQUEST_RATIO: ['k8sCpuRequestRatio', num, '0.25'],
  SANDGATE_K8S_AGENT_PORT: ['k8sAgentPort', int, '8700'],
  SANDGATE_K8S_SERVICES_PORT: ['k8sServicesPort', int, '8701'],
  SANDGATE_K8S_VOLUMES_PORT: ['k8sVolumesPort', int, '8702'],
  SANDGATE_IMAGE: ['image', str, 'sandgate/runtime:1'],
  SANDGATE_RUNTIME: ['runtime', str, 'runc'],
  SANDGATE_MEMORY_LIMIT: ['memoryMb', (r) => Math.floor(parseBytes(r) / (1 << 20)), '512m'],
  SANDGATE_CPU_LIMIT: ['cpus', num, '1.0'],
  SANDGATE_PIDS_LIMIT: ['pidsLimit', int, '128'],
  SANDGATE_EXEC_TIMEOUT_S: ['execTimeoutMs', seconds, '60'],
  SANDGATE_SESSION_RETENTION_S: ['sessionTtlSeconds', int, String(7 * 86_400)],
  SANDGATE_SESSION_IDLE_PAUSE_S: ['sessionIdlePauseSeconds', int, '300'],
  SANDGATE_MAX_SNAPSHOTS: ['maxSnapshots', int, '10'],
  SANDGATE_MAX_TERMINALS: ['maxTerminals', int, '4'],
  SANDGATE_MAX_METRIC_STREAMS_PER_SESSION: ['maxMetricStreamsPerSession', int, '8'],
  SANDGATE_MAX_METRIC_STREAMS_PER_TENANT: ['maxMetricStreamsPerTenant', int, '32'],
  SANDGATE_STATS_HISTORY_S: ['statsHistorySeconds', int, '15'],
  SANDGATE_UNDO_DEPTH: ['undoDepth', int, '5'],
  SANDGATE_FILE_EVENTS_INTERVAL_MS: ['fileEventsIntervalMs', int, '250'],
  SANDGATE_FILE_EVENTS_MAX_PER_INTERVAL: ['fileEventsMaxPerInterval', int, '10000'],
  SANDGATE_FILE_EVENTS_MAX_WATCHES: ['fileEventsMaxWatches', int, '8192'],
  SANDGATE_FILE_EVENTS_KEEP: ['fileEventsKeep', int, '1000'],
  SANDGATE_FILE_EVENTS_TTL_S: ['fileEventsTtlSeconds', int, '3600'],
  SANDGATE_MAX_STATE_BYTES: ['maxStateBytes', parseBytes, '1GiB'],
  SANDGATE_STATE_SAVE_TIMEOUT_S: ['stateSaveTimeoutMs', seconds, '60'],
  SANDGATE_MAX_SESSIONS: ['maxSessions', int, '20'],
  SANDGATE_MAX_UPLOAD_BYTES: ['maxUploadBytes', parseBytes, '50MB'],
  SANDGATE_SESSION_DISK_BYTES: ['sessionDiskBytes', parseBytes, '1GiB'],
  SANDGATE_MAX_ARTIFACT_READ_BYTES: ['maxArtifactReadBytes', parseBytes, '10MB'],
  SANDGATE_MAX_OUTPUT_BYTES: ['maxOutputBytes', parseBytes, '100KB'],
  SANDGATE_MAX_CODE_BYTES: ['maxCodeBytes', parseBytes, '100KB'],
  SANDGATE_MAX_SCRIPTS: ['maxScripts', int, '100'],
  SANDGATE_MAX_VOLUMES: ['maxVolumes', int, '10'],
  SANDGATE_MAX_VOLUME_BYTES: ['maxVolumeBytes', parseBytes, '10GiB'],
  SANDGATE_DATA_DIR: ['dataDir', str, '/var/lib/sandgate'],
  SANDGATE_HOST: ['host', str, '127.0.0.1'],
  SANDGATE_PORT: ['port', int, '8080'],
  SANDGATE_PUBLIC_URL: ['publicUrl', str, null],
  SANDGATE_LOG_LEVEL: ['logLevel', str, 'info'],
  SANDGATE_API_KEYS: ['apiKeys', parseApiKeys, ''],
  SANDGATE_SIGNING_KEY: ['signingKey', str, null],
  SANDGATE_DOWNLOAD_URL_TTL_S: ['downloadUrlTtlSeconds', int, '3600'],
  SANDGATE_RETENTION_S: ['retentionSeconds', int, '86400'],
  SANDGATE_WORKER_CONCURRENCY: ['workerConcurrency', int, '2'],
  SANDGATE_POOL_SIZE: ['poolSize', int, '2'],
  SANDGATE_POOL_MAX_RUNS: ['poolMaxRuns', int, '100'],
  SANDGATE_SANDBOX_UID: ['sandboxUid', int, '1000'],
  SANDGATE_LEASE_MS: ['leaseMs', int, '10000'],
  SANDGATE_SWEEP_INTERVAL_S: ['sweepIntervalMs', seconds, '30'],
  SANDGATE_OPERATOR_KEYS: ['operatorKeys', parseOperatorKeys, ''],
  SANDGATE_METRICS_PORT: ['metricsPort', int, null],
  SANDGATE_METRICS_HOST: ['metricsHost', str, '127.0.0.1'],
  SANDGATE_REQUEST_TIMEOUT_S: ['requestTimeoutMs', seconds, '300'],
  SANDGATE_SHUTDOWN_GRACE_S: ['shutdownGraceMs', seconds, '30'],
  SANDGATE_LOG_FORMAT: ['logFormat', str, null],
  SANDGATE_TENANT_MAX_RUNNING: ['tenantMaxRunning', int, '8'],
  SANDGATE_TENANT_MAX_QUEUED: ['tenantMaxQueued', int, '200'],
  SANDGATE_TENANT_RUNS_PER_MIN: ['tenantRunsPerMin', int, '600'],
  SANDGATE_TENANT_UPLOADS_PER_MIN: ['tenantUploadsPerMin', int, '600'],
  SANDGATE_TENANT_STORAGE_BYTES: ['tenantStorageBytes', parseBytes, '10GiB'],
  SANDGATE_MIN_FREE_BYTES: ['minFreeBytes', parseBytes, '256MiB'],
  SANDGATE_RATE_LIMIT_PER_MIN: ['rateLimitPerMin', int, '6000'],
  SANDGATE_TENANT_LIMITS: ['tenantLimits', parseJsonObject, '{}'],
  SANDGATE_TOOLS: ['tools', parseJsonObject, '{}'],
  SANDGATE_TOOL_MAX_CALLS: ['toolMaxCalls', int, '50'],
  SANDGATE_TOOL_TIMEOUT_S: ['toolTimeoutMs', seconds, '10'],
  SANDGATE_TOOL_MAX_RESPONSE_BYTES: ['toolMaxResponseBytes', parseBytes, '1MiB'],
  SANDGATE_EGRESS: ['egress', parseJsonObject, '{}'],
  SANDGATE_EGRESS_MAX_CONNECTIONS: ['egressMaxConnections', int, '32'],
  SANDGATE_ALLOWED_HOSTS: ['allowedHosts', list, ''],
  SANDGATE_CORS_ORIGINS: ['corsOrigins', list, ''],
  SANDGATE_WEBHOOK_ALLOW: ['webhookAllow', list, ''],
  SANDGATE_WEBHOOK_ATTEMPTS: ['webhookAttempts', int, '8'],
  SANDGATE_WEBHOOK_BACKOFF_MS: ['webhookBackoffMs', int, '2000'],
  SANDGATE_WEBHOOK_TIMEOUT_S: ['webhookTimeoutMs', (r) => Math.round(Number(num(r)) * 1000), '10'],
  SANDGATE_TEMPLATES: ['templatesFile', (r) => (r.trim() === '' ? null : r), null],
  SANDGATE_TENANT_TEMPLATES: ['tenantTemplates', parseJsonObject, '{}'],
  SANDGATE_TEMPLATE_WHEELS_DIR: ['templateWheelsDir', (r) => (r.trim() === '' ? null : r), null],
  SANDGATE_TEMPLATE_WHEELS_MAX_BYTES: ['templateWheelsMaxBytes', parseBytes, '2GiB'],
  SANDGATE_TEMPLATE_PIP_INDEX_URL: [
    'templatePipIndexUrl',
    (r) => (r.trim() === 'none' ? null : r),
    'https://pypi.org/simple',
  ],
  SANDGATE_TEMPLATE_NPM_REGISTRY: ['templateNpmRegistry', str, 'https://registry.npmjs.org/'],
  SANDGATE_TEMPLATE_CA_FILE: ['templateCaFile', (r) => (r.trim() === '' ? null : r), null],
  SANDGATE_TEMPLATE_BUILD_TIMEOUT_S: ['templateBuildTimeoutMs', seconds, '1200'],
  SANDGATE_TEMPLATE_LOG_BYTES: ['templateLogBytes', parseBytes, '1MiB'],
  SANDGATE_TEMPLATE_MAX_FILE_BYTES: ['templateMaxFileBytes', parseBytes, '8MiB'],
  SANDGATE_MAX_TEMPLATES: ['maxTemplates', int, '100'],
  SANDGATE_PREVIEW_ORIGIN: ['previewOrigin', parsePreviewOrigin, ''],
};

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Variables that still work but say something else now: SANDGATE_SESSION_TTL_M was the idle time after which a
 * session was deleted; sessions now pause when idle and are deleted after a retention, which it stands for (in
 * minutes) unless SANDGATE_SESSION_RETENTION_S is set. Answers the warnings to log at start-up.
 */
export function configWarnings(env: Env = process.env): string[] {
  if (env.SANDGATE_SESSION_TTL_M === undefined) return [];
  return [
    env.SANDGATE_SESSION_RETENTION_S === undefined
      ? 'SANDGATE_SESSION_TTL_M is deprecated: it now sets the retention of unused sessions (deleted after it); ' +
        'idle sessions pause after SANDGATE_SESSION_IDLE_PAUSE_S. Use SANDGATE_SESSION_RETENTION_S (seconds)'
      : 'SANDGATE_SESSION_TTL_M is deprecated and ignored: SANDGATE_SESSION_RETENTION_S is set',
  ];
}

/** Reads and validates the configuration; throws one ConfigError naming every bad variable. */
export function loadConfig(env: Env = process.env): Config {
  if (env.SANDGATE_SESSION_TTL_M !== undefined && env.SANDGATE_SESSION_RETENTION_S === undefined) {
    const minutes = Number(env.SANDGATE_SESSION_TTL_M);
    env = { ...env, SANDGATE_SESSION_RETENTION_S: Number.isFinite(minutes) ? String(Math.round(minutes * 60)) : 'NaN' };
  }
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, [field, parse, dflt]] of Object.entries(VARS)) {
    const raw = env[name] ?? dflt;
    if (raw === null) {
      out[field] = null;
      continue;
    }
    const value = parse(raw);
    if (typeof value === 'string' && STRUCTURED.has(parse)) {
      problems.push(`${name}: ${value}`);
      continue;
    }
    if (typeof value === 'number' && !Number.isFinite(value)) {
      problems.push(`${name}: "${raw}" is not a valid number or size`);
      continue;
    }
    out[field] = value;
  }
  out.publicUrl ??= `http://${String(out.host).includes(':') ? `[${out.host}]` : out.host}:${out.port}`;
  problems.push(...previewOriginClashes(out));
  problems.push(...sentinelProblems(out));
  if (out.backend === 'kubernetes' && out.k8sGatewayUrl === null) {
    problems.push('SANDGATE_K8S_GATEWAY_URL: the kubernetes backend needs the URL sandbox Pods reach the gateway at');
  }
  out.templates = [];
  if (problems.length === 0 && out.templatesFile !== null) {
    const read = readTemplatesFile(String(out.templatesFile), out as unknown as Config);
    if ('problems' in read) problems.push(...read.problems.map((p) => `SANDGATE_TEMPLATES: ${p}`));
    else out.templates = read.recipes;
  }
  if (problems.length === 0) {
    for (const e of Value.Errors(ConfigSchema, out)) {
      const field = (k: string) => `/${VARS[k]![0]}`;
      const name = Object.keys(VARS).find((k) => e.path === field(k) || e.path.startsWith(`${field(k)}/`)) ?? e.path;
      problems.push(`${name}: ${e.message} (got ${JSON.stringify(e.value)})`);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return out as Config;
}

/** What Sentinel needs beside the sentinels' addresses. */
function sentinelProblems(out: Record<string, unknown>): string[] {
  const sentinels = out.redisSentinels as RedisSentinel[] | undefined;
  if (!sentinels || sentinels.length === 0) {
    return out.redisSentinelPassword ? ['SANDGATE_REDIS_SENTINEL_PASSWORD: set without SANDGATE_REDIS_SENTINELS'] : [];
  }
  // TLS to sentinels and to the nodes behind them is a set of options of its own in ioredis, and untested here.
  return String(out.redisUrl).startsWith('rediss://')
    ? ['SANDGATE_REDIS_SENTINELS: TLS (a rediss:// REDIS_URL) is not supported with Sentinel; use redis://']
    : [];
}

/** Hosts the gateway answers as itself that the preview origin would take for previews (they would never reach it). */
function previewOriginClashes(out: Record<string, unknown>): string[] {
  const origin = out.previewOrigin as PreviewOrigin | null | undefined;
  if (!origin) return [];
  const hostOf = (url: unknown) => {
    try {
      return new URL(String(url)).hostname;
    } catch {
      return undefined;
    }
  };
  const own = [
    ['SANDGATE_PUBLIC_URL', hostOf(out.publicUrl)],
    ['SANDGATE_K8S_GATEWAY_URL', out.k8sGatewayUrl ? hostOf(out.k8sGatewayUrl) : undefined],
    ...((out.allowedHosts as string[] | undefined) ?? []).map((h) => ['SANDGATE_ALLOWED_HOSTS', h]),
  ] as const;
  return own
    .filter(([, host]) => host !== undefined && previewLabelOf(origin, host) !== undefined)
    .map(
      ([name, host]) => `SANDGATE_PREVIEW_ORIGIN: ${host} (${name}) would be taken for a preview; use another domain`,
    );
}

/** An IP address of the loopback interface (127.0.0.0/8, ::1, or IPv4-mapped 127/8); names are not addresses. */
export const isLoopbackAddress = (ip: string): boolean => {
  const v4 = ip.toLowerCase().replace(/^::ffff:/, '');
  if (isIPv4(v4)) return v4.startsWith('127.');
  return isIPv6(ip) && (ip === '::1' || /^0{0,4}(:0{0,4}){6}:0{0,3}1$/.test(ip));
};

/** The tenant every request belongs to when no API keys are configured (development mode). */
export const OPEN_TENANT = 'default';
