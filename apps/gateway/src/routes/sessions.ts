import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  CreateSessionSchema,
  PageQuerySchema,
  ProblemSchema,
  SandgateError,
  SessionListSchema,
  SessionParamsSchema,
  SessionSchema,
  ref,
} from '@sandgate/contracts';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';

export const sessionRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const { sessions, sessionControl, config, cursors } = deps;
  const errors = { 400: ref(ProblemSchema), 401: ref(ProblemSchema), 404: ref(ProblemSchema) };

  app.post(
    '',
    {
      // `curl -X POST .../v1/sessions` sends no body at all: treat it as `{}`.
      preValidation: async (req) => {
        req.body ??= {};
      },
      schema: {
        operationId: 'createSession',
        tags: ['sessions'],
        summary: 'Create a session (a working directory, /mnt/data in the sandbox)',
        body: ref(CreateSessionSchema),
        response: {
          201: ref(SessionSchema),
          403: ref(ProblemSchema),
          409: ref(ProblemSchema),
          429: ref(ProblemSchema),
          501: ref(ProblemSchema),
          ...errors,
        },
      },
    },
    async (req, reply) => {
      const s = await sessionControl.open(tenantOf(req), {
        ttlSeconds: req.body.ttl_seconds,
        metadata: req.body.metadata,
        mode: req.body.mode,
        idlePauseSeconds: req.body.idle_pause_seconds,
        undo: req.body.undo,
        template: req.body.template,
        volumes: req.body.volumes,
      });
      return reply
        .status(201)
        .header('location', `${config.publicUrl}/v1/sessions/${s.id}`)
        .send(sessionControl.present(s));
    },
  );

  app.get(
    '',
    {
      schema: {
        operationId: 'listSessions',
        tags: ['sessions'],
        summary: "List live sessions, newest first, a page at a time (a one-shot's session is not live)",
        querystring: PageQuerySchema,
        response: { 200: ref(SessionListSchema), ...errors },
      },
    },
    async (req) => {
      const tenant = tenantOf(req);
      const scope = `sessions\n${tenant}`;
      const { items, next } = await sessions.page(
        tenant,
        cursors.decode(scope, req.query.cursor),
        req.query.limit ?? 50,
      );
      return {
        sessions: items.map((s) => sessionControl.present(s)),
        next_cursor: next === null ? null : cursors.encode(scope, next),
      };
    },
  );

  app.get(
    '/:id',
    {
      schema: {
        operationId: 'getSession',
        tags: ['sessions'],
        summary: 'Get a session',
        params: SessionParamsSchema,
        response: { 200: ref(SessionSchema), ...errors },
      },
    },
    async (req) => sessionControl.present(await sessions.require(tenantOf(req), req.params.id)),
  );

  app.post(
    '/:id/restart',
    {
      schema: {
        operationId: 'restartSession',
        tags: ['sessions'],
        summary: 'Restart the session sandbox: a stateful interpreter starts afresh on the next execution; files stay',
        params: SessionParamsSchema,
        response: { 200: ref(SessionSchema), 409: ref(ProblemSchema), ...errors },
      },
    },
    async (req) => {
      const s = await sessions.require(tenantOf(req), req.params.id);
      if (s.currentExecutionId) {
        throw new SandgateError(
          'session_busy',
          `session ${s.id} is running ${s.currentExecutionId}; cancel it or wait for it first`,
        );
      }
      const restarted = await sessions.restart(s);
      // A fresh interpreter: variables saved by a pause (or left by a restore) are not loaded into it.
      await deps.sessionLifecycle.dropVariables(s.id);
      return sessionControl.present(restarted);
    },
  );

  app.post(
    '/:id/private',
    {
      schema: {
        operationId: 'makeSessionPrivate',
        tags: ['sessions'],
        summary:
          'Mark the session as holding private data: it loses network for the rest of its life (files kept; cannot ' +
          'be undone)',
        params: SessionParamsSchema,
        response: { 200: ref(SessionSchema), ...errors },
      },
    },
    async (req) => sessionControl.present(await sessionControl.makePrivate(tenantOf(req), req.params.id)),
  );

  app.delete(
    '/:id',
    {
      schema: {
        operationId: 'deleteSession',
        tags: ['sessions'],
        summary: 'Delete a session and its files; a running execution is cancelled',
        params: SessionParamsSchema,
        response: { 204: Type.Null(), ...errors },
      },
    },
    async (req, reply) => {
      await sessionControl.close(tenantOf(req), req.params.id);
      return reply.status(204).send(null);
    },
  );
};
