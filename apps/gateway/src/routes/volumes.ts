import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  CreateVolumeSchema,
  ProblemSchema,
  VolumeListSchema,
  VolumeParamsSchema,
  VolumeSchema,
  ref,
} from '@sandgate/contracts';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';

/** The tenant's volumes: storage that outlives sessions, mounted by the sessions made with it. */
export const volumeRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const { volumeControl, config } = deps;
  const errors = { 400: ref(ProblemSchema), 401: ref(ProblemSchema), 404: ref(ProblemSchema) };

  app.post(
    '',
    {
      schema: {
        operationId: 'createVolume',
        tags: ['volumes'],
        summary: 'Create a volume: files that outlive sessions, mounted by the sessions made with it',
        description:
          "Its size is taken from the tenant's storage quota at once and for as long as it exists (413 " +
          'storage_quota_exceeded when it does not fit); at most SANDGATE_MAX_VOLUMES per tenant (409 max_volumes).',
        body: ref(CreateVolumeSchema),
        response: { 201: ref(VolumeSchema), 409: ref(ProblemSchema), 413: ref(ProblemSchema), ...errors },
      },
    },
    async (req, reply) => {
      const volume = await volumeControl.create(tenantOf(req), req.body);
      return reply.status(201).header('location', `${config.publicUrl}/v1/volumes/${volume.name}`).send(volume);
    },
  );

  app.get(
    '',
    {
      schema: {
        operationId: 'listVolumes',
        tags: ['volumes'],
        summary: "List the tenant's volumes, by name, with what each holds and the sessions that mount it",
        response: { 200: ref(VolumeListSchema), ...errors },
      },
    },
    async (req) => ({ volumes: await volumeControl.list(tenantOf(req)) }),
  );

  app.get(
    '/:name',
    {
      schema: {
        operationId: 'getVolume',
        tags: ['volumes'],
        summary: 'Get a volume',
        params: VolumeParamsSchema,
        response: { 200: ref(VolumeSchema), ...errors },
      },
    },
    async (req) => volumeControl.get(tenantOf(req), req.params.name),
  );

  app.delete(
    '/:name',
    {
      schema: {
        operationId: 'deleteVolume',
        tags: ['volumes'],
        summary: 'Delete a volume and its files; refused (409 volume_in_use) while a session mounts it',
        description:
          'Every session that mounts it counts, idle, busy or paused, until it is deleted or expires: delete those ' +
          'sessions first (mounted_by names them).',
        params: VolumeParamsSchema,
        response: { 204: Type.Null(), 409: ref(ProblemSchema), ...errors },
      },
    },
    async (req, reply) => {
      await volumeControl.delete(tenantOf(req), req.params.name);
      return reply.status(204).send(null);
    },
  );
};
