import { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import multipart from '@fastify/multipart';
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  FileListSchema,
  FilePageQuerySchema,
  MultipartUploadSchema,
  ProblemSchema,
  SandgateError,
  SessionParamsSchema,
  UploadJsonSchema,
  UploadResultSchema,
  ref,
  type FileEntry,
} from '@sandgate/contracts';
import { normalizeUserPath, removeInside, walkTree } from '@sandgate/storage';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';
import { presentFile } from '../core/present.ts';
import { wildcardPath } from './wildcard.ts';

const FilePathParams = Type.Object({
  id: SessionParamsSchema.properties.id,
  '*': Type.String({ description: 'Path inside the session' }),
});
const UploadQuery = Type.Object({
  overwrite: Type.Optional(Type.Boolean({ description: 'Replace an existing file; default false.' })),
  private: Type.Optional(
    Type.Boolean({
      description:
        'The files are private data: the session loses network for the rest of its life, before a byte is stored ' +
        '(POST /v1/sessions/{id}/private).',
    }),
  ),
});
/** Multipart fields that say how to save the files: they must come before the file parts they apply to. */
const CONTROL_FIELDS = new Set(['path', 'overwrite']);
const lateField = (name: string) =>
  new SandgateError(
    'validation_failed',
    `the multipart field "${name}" came after a ` +
      `file part; send it before the file (curl: -F ${name}=… -F file=@…), since files are saved as they stream in`,
  );

/** The raw PUT's body, which the route streams to disk itself: any bytes, of any type. */
const RAW_BODY = {
  'application/octet-stream': { schema: { type: 'string', format: 'binary', description: "The file's bytes." } },
  '*/*': { schema: { type: 'string', format: 'binary', description: "The file's bytes, of any type." } },
};

/** Session files: upload (multipart, raw PUT, JSON+base64), list, delete. Every byte is streamed to disk. */
export const fileRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const { config, signer, cursors } = deps;
  const errors = {
    400: ref(ProblemSchema),
    401: ref(ProblemSchema),
    404: ref(ProblemSchema),
    409: ref(ProblemSchema),
    413: ref(ProblemSchema),
  };

  await app.register(multipart, {
    // One byte over our own limit, so writeFileInside reports it (and removes the partial file) first.
    limits: { fileSize: config.maxUploadBytes + 1, files: 32, fields: 16, fieldSize: 4096, parts: 64 },
  });

  const { sessionFiles, sessionControl } = deps;
  const sessionDir = (tenant: string, id: string) => sessionFiles.sessionDir(tenant, id);
  const store = sessionFiles.store.bind(sessionFiles);

  app.post(
    '/:id/files',
    {
      config: {
        quota: 'uploads',
        openapi: { body: { 'multipart/form-data': { schema: ref(MultipartUploadSchema) } } },
      },
      schema: {
        operationId: 'uploadFile',
        tags: ['files'],
        summary:
          'Upload files: multipart/form-data (fields `path`, `overwrite` before the files) or JSON with base64 content',
        params: SessionParamsSchema,
        querystring: UploadQuery,
        body: { content: { 'application/json': { schema: ref(UploadJsonSchema) } } } as never,
        response: { 201: ref(UploadResultSchema), ...errors, 507: ref(ProblemSchema) },
      },
    },
    async (req, reply) => {
      const dir = await sessionDir(tenantOf(req), req.params.id);
      if (req.query.private) await sessionControl.makePrivate(tenantOf(req), req.params.id);
      const files: FileEntry[] = [];
      if (!req.isMultipart()) {
        const body = req.body as { path: string; content_base64: string; overwrite?: boolean };
        const bytes = Buffer.from(body.content_base64, 'base64');
        files.push(
          await store(
            tenantOf(req),
            req.params.id,
            dir,
            body.path,
            Readable.from([bytes]),
            body.overwrite ?? req.query.overwrite ?? false,
          ),
        );
        return reply.status(201).send({ files });
      }
      const fields: Record<string, string> = {};
      // Files this request created (not replaced): removed again if the request turns out to be refused.
      const created: string[] = [];
      try {
        for await (const part of req.parts()) {
          if (part.type === 'field') {
            if (files.length > 0 && CONTROL_FIELDS.has(part.fieldname)) throw lateField(part.fieldname);
            fields[part.fieldname] = String(part.value);
            continue;
          }
          const path = files.length === 0 && fields.path ? fields.path : part.filename;
          if (!path) {
            part.file.resume();
            throw new SandgateError('invalid_path', 'a file part needs a filename or a preceding `path` field');
          }
          const overwrite =
            fields.overwrite === undefined ? (req.query.overwrite ?? false) : /^(true|1|yes)$/i.test(fields.overwrite);
          const file = await store(tenantOf(req), req.params.id, dir, path, part.file, overwrite);
          files.push(file);
          if (!overwrite) created.push(file.path);
        }
      } catch (err) {
        await Promise.all(created.map((p) => removeInside(dir, normalizeUserPath(p)).catch(() => undefined)));
        throw err;
      }
      if (files.length === 0) throw new SandgateError('bad_request', 'the multipart body has no file part');
      return reply.status(201).send({ files });
    },
  );

  // Raw uploads get the body as a stream, whatever its content type.
  await app.register(async (instance) => {
    const raw = instance.withTypeProvider<TypeBoxTypeProvider>();
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
    raw.put(
      '/:id/files/*',
      {
        config: { quota: 'uploads', openapi: { body: RAW_BODY } },
        schema: {
          operationId: 'putFile',
          tags: ['files'],
          summary: 'Upload one file with the raw request body (streamed)',
          params: FilePathParams,
          querystring: UploadQuery,
          response: { 201: ref(UploadResultSchema), ...errors, 507: ref(ProblemSchema) },
        },
      },
      async (req, reply) => {
        const length = Number(req.headers['content-length'] ?? NaN);
        if (length > config.maxUploadBytes) {
          throw new SandgateError(
            'payload_too_large',
            `the body is ${length} bytes; the limit is ${config.maxUploadBytes} bytes`,
          );
        }
        const dir = await sessionDir(tenantOf(req), req.params.id);
        if (req.query.private) await sessionControl.makePrivate(tenantOf(req), req.params.id);
        const file = await store(
          tenantOf(req),
          req.params.id,
          dir,
          wildcardPath(req.params['*']),
          req.raw,
          req.query.overwrite ?? false,
        );
        return reply.status(201).send({ files: [file] });
      },
    );
  });

  app.get(
    '/:id/files',
    {
      schema: {
        operationId: 'listFiles',
        tags: ['files'],
        summary: 'List the files of a session',
        description:
          'Paths in walk order (segment by segment, so `a/b` before `a-c`), `limit` at a time; ' +
          '`next_cursor` gives the next page.',
        params: SessionParamsSchema,
        querystring: FilePageQuerySchema,
        response: { 200: ref(FileListSchema), ...errors },
      },
    },
    async (req) => {
      const tenant = tenantOf(req);
      const dir = await sessionDir(tenant, req.params.id);
      const scope = `files\n${tenant}\n${req.params.id}`;
      const after = cursors.decode(scope, req.query.cursor) ?? undefined;
      const { entries, truncated, more } = await walkTree(dir, { maxEntries: req.query.limit ?? 1000, after });
      const last = entries.at(-1);
      return {
        files: entries.map((e) => presentFile(req.params.id, e, signer)),
        next_cursor: more && last ? cursors.encode(scope, last.path) : null,
        truncated: truncated && !more,
      };
    },
  );

  app.delete(
    '/:id/files/*',
    {
      schema: {
        operationId: 'deleteFile',
        tags: ['files'],
        summary: 'Delete a file or directory of a session',
        params: FilePathParams,
        response: { 204: Type.Null(), ...errors },
      },
    },
    async (req, reply) => {
      const dir = await sessionDir(tenantOf(req), req.params.id);
      await removeInside(dir, normalizeUserPath(wildcardPath(req.params['*'])));
      await sessionFiles.recordUsage(tenantOf(req), req.params.id);
      return reply.status(204).send(null);
    },
  );
};
