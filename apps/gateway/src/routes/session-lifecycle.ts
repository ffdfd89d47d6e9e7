import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  CreateSnapshotSchema,
  ForkSessionSchema,
  PauseSessionSchema,
  ProblemSchema,
  RestoreSnapshotQuerySchema,
  SessionForkSchema,
  SessionParamsSchema,
  SessionPauseSchema,
  SessionResumeSchema,
  SessionUndoSchema,
  SnapshotListSchema,
  SnapshotParamsSchema,
  SnapshotRestoreSchema,
  SnapshotSchema,
  ref,
} from '@sandgate/contracts';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';

/** Pause and resume, fork, snapshots and undo of a session: each a few lines over SessionLifecycle. */
export const sessionLifecycleRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const { sessionLifecycle: lifecycle, sessionControl } = deps;
  const problem = ref(ProblemSchema);
  const errors = { 400: problem, 401: problem, 404: problem, 409: problem, 503: problem };
  // `curl -X POST …` sends no body at all: treat it as `{}`.
  const emptyBody = async (req: { body: unknown }) => {
    req.body ??= {};
  };

  app.post(
    '/:id/pause',
    {
      preValidation: emptyBody,
      schema: {
        operationId: 'pauseSession',
        tags: ['sessions'],
        summary:
          "Pause a session: a stateful interpreter's variables are saved, its sandbox is removed (no memory, no CPU); " +
          'files kept. Its next run, or POST …/resume, brings it back',
        params: SessionParamsSchema,
        body: ref(PauseSessionSchema),
        response: { 200: ref(SessionPauseSchema), 413: problem, ...errors },
      },
    },
    async (req) => {
      const { session, variables } = await lifecycle.pause(
        tenantOf(req),
        req.params.id,
        req.body.discard_variables === true,
      );
      return { session: sessionControl.present(session), variables };
    },
  );

  app.post(
    '/:id/resume',
    {
      schema: {
        operationId: 'resumeSession',
        tags: ['sessions'],
        summary: 'Bring a paused session back now, in a new sandbox with its files and variables (a run would too)',
        params: SessionParamsSchema,
        response: { 200: ref(SessionResumeSchema), 429: problem, ...errors },
      },
    },
    async (req) => {
      const { session, resumed } = await lifecycle.resume(tenantOf(req), req.params.id);
      return { session: sessionControl.present(session), resumed };
    },
  );

  app.post(
    '/:id/fork',
    {
      preValidation: emptyBody,
      schema: {
        operationId: 'forkSession',
        tags: ['sessions'],
        summary:
          'Copy a session (1 to 10 times): each copy holds its files and variables, paused until its first run; the ' +
          'source keeps going',
        params: SessionParamsSchema,
        body: ref(ForkSessionSchema),
        response: { 201: ref(SessionForkSchema), 413: problem, ...errors },
      },
    },
    async (req, reply) => {
      const made = await lifecycle.fork(tenantOf(req), req.params.id, req.body.count ?? 1, req.body.metadata);
      return reply.status(201).send({ sessions: made.map((s) => sessionControl.present(s)) });
    },
  );

  app.post(
    '/:id/snapshots',
    {
      schema: {
        operationId: 'createSnapshot',
        tags: ['sessions'],
        summary: "Keep the session's files (and a stateful session's variables) as they are now, by name",
        params: SessionParamsSchema,
        body: ref(CreateSnapshotSchema),
        response: { 201: ref(SnapshotSchema), 413: problem, ...errors },
      },
    },
    async (req, reply) => reply.status(201).send(await lifecycle.snapshot(tenantOf(req), req.params.id, req.body.name)),
  );

  app.get(
    '/:id/snapshots',
    {
      schema: {
        operationId: 'listSnapshots',
        tags: ['sessions'],
        summary: "List a session's snapshots, oldest first",
        params: SessionParamsSchema,
        response: { 200: ref(SnapshotListSchema), ...errors },
      },
    },
    async (req) => ({ snapshots: await lifecycle.snapshots(tenantOf(req), req.params.id) }),
  );

  app.post(
    '/:id/snapshots/:name/restore',
    {
      schema: {
        operationId: 'restoreSnapshot',
        tags: ['sessions'],
        summary:
          'Roll the session back to a snapshot (its sandbox goes; it comes back paused), or make a new session from ' +
          'it with ?into=new',
        params: SnapshotParamsSchema,
        querystring: RestoreSnapshotQuerySchema,
        response: { 200: ref(SnapshotRestoreSchema), 201: ref(SnapshotRestoreSchema), 413: problem, ...errors },
      },
    },
    async (req, reply) => {
      const intoNew = req.query.into === 'new';
      const s = await lifecycle.restore(tenantOf(req), req.params.id, req.params.name, intoNew);
      return reply.status(intoNew ? 201 : 200).send({ session: sessionControl.present(s) });
    },
  );

  app.delete(
    '/:id/snapshots/:name',
    {
      schema: {
        operationId: 'deleteSnapshot',
        tags: ['sessions'],
        summary: 'Delete a snapshot',
        params: SnapshotParamsSchema,
        response: { 204: Type.Null(), ...errors },
      },
    },
    async (req, reply) => {
      await lifecycle.deleteSnapshot(tenantOf(req), req.params.id, req.params.name);
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/:id/undo',
    {
      schema: {
        operationId: 'undoRun',
        tags: ['sessions'],
        summary:
          "Bring the session's files back to how they were before its last run (one run further back each time); " +
          'its sandbox goes, and it comes back paused',
        params: SessionParamsSchema,
        response: { 200: ref(SessionUndoSchema), ...errors },
      },
    },
    async (req) => {
      const { session, ...rest } = await lifecycle.undo(tenantOf(req), req.params.id);
      return { session: sessionControl.present(session), ...rest };
    },
  );
};
