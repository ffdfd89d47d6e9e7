import { Type, type Static } from '@sinclair/typebox';
import { NAME_PATTERN, SessionIdSchema, TimestampSchema, VOLUME_ID_PATTERN, ref } from './common.ts';

/** Where volumes are mounted in a session's sandbox: every mount path is under it. */
export const VOLUMES_ROOT = '/mnt/volumes';
/** Volumes one session may mount. */
export const MAX_SESSION_VOLUMES = 8;
/**
 * A mount path: /mnt/volumes and one to four segments of letters, digits, `.`, `_` and `-`, none starting with `.`
 * (so no `.` or `..`, and nothing hidden).
 */
export const VOLUME_PATH_PATTERN = '^/mnt/volumes(/[A-Za-z0-9_][A-Za-z0-9._-]{0,62}){1,4}$';

export const VolumeIdSchema = Type.String({ pattern: VOLUME_ID_PATTERN, examples: ['vol_5d1e0c9a2b7f'] });
export const VolumeNameSchema = Type.String({
  pattern: NAME_PATTERN,
  description: "Unique among the tenant's volumes: lowercase letters, digits, `_` and `-`, at most 63.",
  examples: ['datasets'],
});

/** A session's volume, as a session shows it. */
export const VolumeMountSchema = Type.Object(
  {
    name: VolumeNameSchema,
    path: Type.String({ description: 'Where the volume is in the sandbox, under /mnt/volumes/.' }),
    read_only: Type.Boolean({ description: 'Mounted read-only: nothing in the session can change it.' }),
  },
  { $id: 'VolumeMount', title: 'VolumeMount' },
);
export type VolumeMount = Static<typeof VolumeMountSchema>;

/** A volume to mount, as a session is created with it. */
export const MountVolumeSchema = Type.Object(
  {
    name: VolumeNameSchema,
    path: Type.Optional(
      Type.String({
        pattern: VOLUME_PATH_PATTERN,
        maxLength: 255,
        description:
          'Where to mount it: under /mnt/volumes/ (default /mnt/volumes/<name>). Two volumes of a session may not ' +
          'share a path or be nested in each other.',
        examples: ['/mnt/volumes/datasets'],
      }),
    ),
    read_only: Type.Optional(
      Type.Boolean({
        description:
          'Mount it read-only (default false). A volume has one writer at a time: a read-write mount is refused ' +
          '(409 volume_in_use) while another live session mounts it read-write; read-only mounts are always allowed.',
      }),
    ),
  },
  { $id: 'MountVolume', title: 'MountVolume', additionalProperties: false },
);
export type MountVolume = Static<typeof MountVolumeSchema>;

/** A session using a volume. */
export const VolumeUserSchema = Type.Object({
  session_id: SessionIdSchema,
  path: Type.String({ description: 'Where that session mounts it.' }),
  read_only: Type.Boolean(),
});
export type VolumeUser = Static<typeof VolumeUserSchema>;

export const VolumeSchema = Type.Object(
  {
    id: VolumeIdSchema,
    name: VolumeNameSchema,
    size_bytes: Type.Integer({
      description:
        "The volume's size: what it may hold, and what it takes of the tenant's storage quota from its creation.",
    }),
    used_bytes: Type.Integer({ description: 'Bytes its files take now.' }),
    created_at: TimestampSchema,
    mounted_by: Type.Array(VolumeUserSchema, {
      description: 'The sessions that mount it (idle, busy or paused): while any does, it cannot be deleted.',
    }),
  },
  { $id: 'Volume', title: 'Volume' },
);
export type Volume = Static<typeof VolumeSchema>;

export const CreateVolumeSchema = Type.Object(
  {
    name: VolumeNameSchema,
    size_bytes: Type.Integer({
      minimum: 1 << 20,
      description:
        'What the volume may hold, in bytes (at least 1 MiB, at most SANDGATE_MAX_VOLUME_BYTES). It counts in full ' +
        "against the tenant's storage quota (SANDGATE_TENANT_STORAGE_BYTES) for as long as the volume exists.",
      examples: [1 << 30],
    }),
  },
  { $id: 'CreateVolume', title: 'CreateVolume', additionalProperties: false },
);
export type CreateVolume = Static<typeof CreateVolumeSchema>;

export const VolumeListSchema = Type.Object(
  { volumes: Type.Array(ref(VolumeSchema), { description: "The tenant's volumes, by name." }) },
  { $id: 'VolumeList', title: 'VolumeList' },
);
export type VolumeList = Static<typeof VolumeListSchema>;

export const VolumeParamsSchema = Type.Object({ name: VolumeNameSchema });

/** A volume as a run's job carries it: resolved by the gateway when the session was made. */
export const JobVolumeSchema = Type.Object({
  id: VolumeIdSchema,
  name: Type.String(),
  path: Type.String(),
  read_only: Type.Boolean(),
  size_bytes: Type.Integer(),
});
export type JobVolume = Static<typeof JobVolumeSchema>;
