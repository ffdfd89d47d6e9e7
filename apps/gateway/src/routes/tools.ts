import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ToolCaller, toolsFor } from '@sandgate/config';
import {
  ProblemSchema,
  SandgateError,
  ToolCallResultSchema,
  ToolListSchema,
  ToolParamsSchema,
  ref,
} from '@sandgate/contracts';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';

/**
 * /v1/tools: the tools the operator offers the tenant's code (SANDGATE_TOOLS), which code in a sandbox calls through
 * sandgate.tools, and the fast path: one call made here, with no sandbox started.
 */
export const toolRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const { config } = deps;
  const caller = new ToolCaller();
  app.addHook('onClose', () => caller.close());
  const limits = { timeoutMs: config.toolTimeoutMs, maxResponseBytes: config.toolMaxResponseBytes };

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
      const tools = toolsFor(config.tools, tenantOf(req));
      const failed = (server: string, err: unknown) =>
        req.log.warn({ server, err: (err as Error).message }, 'could not list the tools of an MCP server');
      return { tools: await caller.list(tools, limits, failed) };
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
    async (req) => {
      const { name } = req.params;
      const tools = toolsFor(config.tools, tenantOf(req));
      const started = performance.now();
      const answer = await caller.call(tools, name, req.body, limits);
      if (answer === undefined) throw new SandgateError('tool_not_found', `no tool "${name}" for this tenant`);
      if (!answer.ok && answer.error.startsWith('invalid arguments: ')) {
        throw new SandgateError('validation_failed', answer.error);
      }
      return { name, ...answer, duration_ms: Math.round(performance.now() - started) };
    },
  );
};
