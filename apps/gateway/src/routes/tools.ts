import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ProblemSchema, ToolCallResultSchema, ToolListSchema, ToolParamsSchema, ref } from '@sandgate/contracts';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';

/**
 * /v1/tools: the tools the operator offers the tenant's code (SANDGATE_TOOLS), which code in a sandbox calls through
 * sandgate.tools, and the fast path: one call made here, with no sandbox started.
 */
export const toolRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const tools = deps.tenantTools;

  app.get(
    '',
    {
      schema: {
        operationId: 'listTools',
        tags: ['tools'],
        summary: "The tools this tenant's code may call",
        response: { 200: ref(ToolListSchema), 401: ref(ProblemSchema) },
      },
    },
    async (req) => {
      const failed = (server: string, err: unknown) =>
        req.log.warn({ server, err: (err as Error).message }, 'could not list the tools of an MCP server');
      return { tools: await tools.list(tenantOf(req), failed) };
    },
  );

  app.post(
    '/:name',
    {
      config: { quota: 'runs' },
      schema: {
        operationId: 'callTool',
        tags: ['tools'],
        summary: 'Call one tool, with no sandbox: the fast path for a request that is a single tool call',
        description:
          "The body is the arguments object, checked against the tool's input_schema. `ok: false` with `error` when " +
          'the tool failed, timed out or answered more than SANDGATE_TOOL_MAX_RESPONSE_BYTES.',
        params: ToolParamsSchema,
        body: Type.Record(Type.String(), Type.Unknown(), { examples: [{ city: 'Oslo' }] }),
        response: {
          200: ref(ToolCallResultSchema),
          400: ref(ProblemSchema),
          401: ref(ProblemSchema),
          404: ref(ProblemSchema),
          429: ref(ProblemSchema),
        },
      },
    },
    async (req) => tools.call(tenantOf(req), req.params.name, req.body),
  );
};
