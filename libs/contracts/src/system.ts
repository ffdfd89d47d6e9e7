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
      pattern: '^whsec_', description: 'Standard Webhooks secret (whsec_ + base64) of this tenant\'s deliveries.',
    }),
  },
  { $id: 'WebhookSecret', title: 'WebhookSecret' },
);

export const HealthSchema = Type.Object(
  { status: Type.String(), checks: Type.Optional(Type.Record(Type.String(), Type.String())) },
  { $id: 'Health', title: 'Health' },
);
export type Health = Static<typeof HealthSchema>;
