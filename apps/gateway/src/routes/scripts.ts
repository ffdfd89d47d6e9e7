import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  CreateScriptSchema,
  ProblemSchema,
  ScriptListSchema,
  ScriptParamsSchema,
  ScriptSchema,
  SandgateError,
  ref,
} from '@sandgate/contracts';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';
import { presentScript } from '../core/script-library.ts';

/** /v1/scripts: a tenant's saved scripts, run by name with POST /v1/executions {"script": name, "args": [...]}. */
export const scriptRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const { scriptLibrary } = deps;
  const errors = { 400: ref(ProblemSchema), 401: ref(ProblemSchema), 404: ref(ProblemSchema) };

  app.post(
    '',
    {
      schema: {
        operationId: 'saveScript',
        tags: ['scripts'],
        summary: 'Save a script: code, or the code of a run that completed (deduplicated by content)',
        description:
          'With `language` and `code`, or with the `execution_id` of a completed run of the tenant (its code is ' +
          'kept for an hour after the run). The same content saved before answers 200 with that script, whatever ' +
          'its name; a name taken by other code is 409 script_exists. The description defaults to the leading comment.',
        body: ref(CreateScriptSchema),
        response: {
          200: ref(ScriptSchema),
          201: ref(ScriptSchema),
          409: ref(ProblemSchema),
          413: ref(ProblemSchema),
          ...errors,
        },
      },
    },
    async (req, reply) => {
      const { script, created } = await scriptLibrary.save(tenantOf(req), req.body);
      return reply.status(created ? 201 : 200).send(presentScript(script));
    },
  );

  app.get(
    '',
    {
      schema: {
        operationId: 'listScripts',
        tags: ['scripts'],
        summary: "The tenant's scripts, by name",
        response: { 200: ref(ScriptListSchema), 401: ref(ProblemSchema) },
      },
    },
    async (req) => ({ scripts: (await deps.scripts.list(tenantOf(req))).map(presentScript) }),
  );

  app.get(
    '/:name',
    {
      schema: {
        operationId: 'getScript',
        tags: ['scripts'],
        summary: 'A script, with its code',
        params: ScriptParamsSchema,
        response: { 200: ref(ScriptSchema), ...errors },
      },
    },
    async (req) => presentScript(await scriptLibrary.require(tenantOf(req), req.params.name)),
  );

  app.delete(
    '/:name',
    {
      schema: {
        operationId: 'deleteScript',
        tags: ['scripts'],
        summary: 'Delete a script',
        params: ScriptParamsSchema,
        response: { 204: Type.Null(), ...errors },
      },
    },
    async (req, reply) => {
      if (!(await deps.scripts.delete(tenantOf(req), req.params.name))) {
        throw new SandgateError('script_not_found', `no script named "${req.params.name}"`);
      }
      return reply.status(204).send(null);
    },
  );
};
