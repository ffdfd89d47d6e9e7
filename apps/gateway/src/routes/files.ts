import { Readable } from 'node:stream';
import { Type, type TObject } from '@sinclair/typebox';
import multipart from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';
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
  VolumeParamsSchema,
  ref,
  type FileEntry,
} from '@sandgate/contracts';
import { normalizeUserPath, openInside, removeInside, walkTree } from '@sandgate/storage';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';
import { presentFile } from '../core/present.ts';
import { storeFile, type FileSpace } from '../core/file-space.ts';
import type { FileChangeNote } from '../core/file-events.ts';
import { wildcardPath } from './wildcard.ts';

const Overwrite = Type.Optional(Type.Boolean({ description: 'Replace an existing file; default false.' }));
const SessionUploadQuery = Type.Object({
  overwrite: Overwrite,
  private: Type.Optional(
    Type.Boolean({
      description:
        'The files are private data: the session loses network for the rest of its life, before a byte is stored ' +
        '(POST /v1/sessions/{id}/private).',
    }),
  ),
});
const VolumeUploadQuery = Type.Object({ overwrite: Overwrite });

/** What differs between the files of a session and those of a volume: everything else is the same routes. */
interface FileOwner {
  /** The route parameter that names the owner, and its schema. */
  param: 'id' | 'name';
  params: TObject;
  uploadQuery: TObject;
  tag: string;
  operationIds: { upload: string; put: string; list: string; delete: string };
  summaries: { upload: string; put: string; list: string; delete: string };
  /** The owner's files, for the tenant of the request (not found for any other tenant). */
  space(deps: GatewayDeps, tenant: string, key: string): Promise<FileSpace>;
  /** After files were stored or deleted through the API (a session's file events). */
  changed?(deps: GatewayDeps, key: string, changes: readonly FileChangeNote[]): Promise<void>;
  /** Before anything of an upload is stored (a session's `private=true`). */
  beforeUpload?(deps: GatewayDeps, tenant: string, key: string, query: Record<string, unknown>): Promise<void>;
}

/** The files of a session (/v1/sessions/{id}/files…): bounded by the tenant's storage quota. */
export const SESSION_FILES: FileOwner = {
  param: 'id',
  params: SessionParamsSchema,
  uploadQuery: SessionUploadQuery,
  tag: 'files',
  operationIds: { upload: 'uploadFile', put: 'putFile', list: 'listFiles', delete: 'deleteFile' },
  summaries: {
    upload:
      'Upload files: multipart/form-data (fields `path`, `overwrite` before the files) or JSON with base64 content',
    put: 'Upload one file with the raw request body (streamed)',
    list: 'List the files of a session',
    delete: 'Delete a file or directory of a session',
  },
  space: (deps, tenant, id) => deps.sessionFiles.space(tenant, id),
  async beforeUpload(deps, tenant, id, query) {
    if (query.private === true) await deps.sessionControl.makePrivate(tenant, id);
  },
  changed: (deps, id, changes) => deps.fileEvents.announce(id, changes),
};

/** The files of a volume (/v1/volumes/{name}/files…): bounded by the volume's size. */
export const VOLUME_FILES: FileOwner = {
  param: 'name',
  params: VolumeParamsSchema,
  uploadQuery: VolumeUploadQuery,
  tag: 'volumes',
  operationIds: {
    upload: 'uploadVolumeFile',
    put: 'putVolumeFile',
    list: 'listVolumeFiles',
    delete: 'deleteVolumeFile',
  },
  summaries: {
    upload: 'Upload files to a volume: multipart/form-data or JSON with base64 content, as for a session',
    put: 'Upload one file to a volume with the raw request body (streamed)',
    list: 'List the files of a volume',
    delete: 'Delete a file or directory of a volume',
  },
  space: (deps, tenant, name) => deps.volumeControl.space(tenant, name),
};

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

/**
 * Files of a session or a volume (`owner`): upload (multipart, raw PUT, JSON+base64), list, delete. Every byte is
 * streamed to disk. Downloads are GET /files/… (downloads.ts), by API key or signed URL.
 */
export const fileRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps; owner?: FileOwner }> = async (
  app,
  { deps, owner = SESSION_FILES },
) => {
  const { config, signer, cursors } = deps;
  const errors = {
    400: ref(ProblemSchema),
    401: ref(ProblemSchema),
    404: ref(ProblemSchema),
    409: ref(ProblemSchema),
    413: ref(ProblemSchema),
  };
  const FilePathParams = Type.Object({
    ...owner.params.properties,
    '*': Type.String({ description: `Path inside the ${owner.param === 'id' ? 'session' : 'volume'}` }),
  });
  const keyOf = (req: FastifyRequest) => (req.params as Record<string, string>)[owner.param]!;
  const spaceOf = (req: FastifyRequest) => owner.space(deps, tenantOf(req), keyOf(req));
  const beforeUpload = (req: FastifyRequest) =>
    owner.beforeUpload?.(deps, tenantOf(req), keyOf(req), req.query as Record<string, unknown>);
  /** Stores one file, then tells the owner what changed (created, or modified when it replaced a file). */
  const store = async (
    space: FileSpace,
    path: string,
    source: Readable | NodeJS.ReadableStream,
    overwrite: boolean,
  ): Promise<FileEntry> => {
    const relPath = normalizeUserPath(path);
    // Opened without following links: the sandbox may have made any component of the path one.
    const existed =
      overwrite &&
      owner.changed !== undefined &&
      (await openInside(space.dir, relPath).then(
        async ({ handle }) => (await handle.close(), true),
        () => false,
      ));
    const file = await storeFile(config, signer, space, path, source, { maxBytes: config.maxUploadBytes, overwrite });
    const change = { path: relPath, size: file.size_bytes, mtimeMs: Date.parse(file.modified_at) };
    await owner.changed?.(deps, space.owner, [{ type: existed ? 'modified' : 'created', ...change }]);
    return file;
  };

  await app.register(multipart, {
    // One byte over our own limit, so writeFileInside reports it (and removes the partial file) first.
    limits: { fileSize: config.maxUploadBytes + 1, files: 32, fields: 16, fieldSize: 4096, parts: 64 },
  });

  app.post(
    `/:${owner.param}/files`,
    {
      config: {
        quota: 'uploads',
        openapi: { body: { 'multipart/form-data': { schema: ref(MultipartUploadSchema) } } },
      },
      schema: {
        operationId: owner.operationIds.upload,
        tags: [owner.tag],
        summary: owner.summaries.upload,
        params: owner.params,
        querystring: owner.uploadQuery,
        body: { content: { 'application/json': { schema: ref(UploadJsonSchema) } } } as never,
        response: { 201: ref(UploadResultSchema), ...errors, 507: ref(ProblemSchema) },
      },
    },
    async (req, reply) => {
      const space = await spaceOf(req);
      await beforeUpload(req);
      const query = req.query as { overwrite?: boolean };
      const files: FileEntry[] = [];
      if (!req.isMultipart()) {
        const body = req.body as { path: string; content_base64: string; overwrite?: boolean };
        const bytes = Buffer.from(body.content_base64, 'base64');
        const overwrite = body.overwrite ?? query.overwrite ?? false;
        files.push(await store(space, body.path, Readable.from([bytes]), overwrite));
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
            fields.overwrite === undefined ? (query.overwrite ?? false) : /^(true|1|yes)$/i.test(fields.overwrite);
          const file = await store(space, path, part.file, overwrite);
          files.push(file);
          if (!overwrite) created.push(file.path);
        }
      } catch (err) {
        await Promise.all(created.map((p) => removeInside(space.dir, normalizeUserPath(p)).catch(() => undefined)));
        if (created.length > 0) await space.measure().catch(() => undefined);
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
      `/:${owner.param}/files/*`,
      {
        config: { quota: 'uploads', openapi: { body: RAW_BODY } },
        schema: {
          operationId: owner.operationIds.put,
          tags: [owner.tag],
          summary: owner.summaries.put,
          params: FilePathParams,
          querystring: owner.uploadQuery,
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
        const space = await spaceOf(req);
        await beforeUpload(req);
        const path = wildcardPath((req.params as { '*': string })['*']);
        const file = await store(space, path, req.raw, (req.query as { overwrite?: boolean }).overwrite ?? false);
        return reply.status(201).send({ files: [file] });
      },
    );
  });

  app.get(
    `/:${owner.param}/files`,
    {
      schema: {
        operationId: owner.operationIds.list,
        tags: [owner.tag],
        summary: owner.summaries.list,
        description:
          'Paths in walk order (segment by segment, so `a/b` before `a-c`), `limit` at a time; ' +
          '`next_cursor` gives the next page.',
        params: owner.params,
        querystring: FilePageQuerySchema,
        response: { 200: ref(FileListSchema), ...errors },
      },
    },
    async (req) => {
      const tenant = tenantOf(req);
      const space = await spaceOf(req);
      // The scope names the owner's id: a cursor of one session or volume means nothing for another.
      const scope = `files\n${tenant}\n${space.owner}`;
      const after = cursors.decode(scope, req.query.cursor) ?? undefined;
      const { entries, truncated, more } = await walkTree(space.dir, { maxEntries: req.query.limit ?? 1000, after });
      const last = entries.at(-1);
      return {
        files: entries.map((e) => presentFile(space.owner, e, signer)),
        next_cursor: more && last ? cursors.encode(scope, last.path) : null,
        truncated: truncated && !more,
      };
    },
  );

  app.delete(
    `/:${owner.param}/files/*`,
    {
      schema: {
        operationId: owner.operationIds.delete,
        tags: [owner.tag],
        summary: owner.summaries.delete,
        params: FilePathParams,
        response: { 204: Type.Null(), ...errors },
      },
    },
    async (req, reply) => {
      const space = await spaceOf(req);
      const relPath = normalizeUserPath(wildcardPath((req.params as { '*': string })['*']));
      await removeInside(space.dir, relPath);
      await space.measure();
      await owner.changed?.(deps, space.owner, [{ type: 'deleted', path: relPath, size: 0, mtimeMs: Date.now() }]);
      return reply.status(204).send(null);
    },
  );
};
