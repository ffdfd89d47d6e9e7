import { Type } from '@sinclair/typebox';
import { create as contentDisposition } from 'content-disposition';
import rangeParser from 'range-parser';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ProblemSchema, SESSION_ID_PATTERN, SandgateError, VOLUME_ID_PATTERN, ref } from '@sandgate/contracts';
import { contentTypeFor, normalizeUserPath, openInside } from '@sandgate/storage';
import type { GatewayDeps } from '../deps.ts';
import { wildcardPath } from './wildcard.ts';

const Params = Type.Object({ session: Type.String({ pattern: SESSION_ID_PATTERN }), '*': Type.String() });
const VolumeParams = Type.Object({ volume: Type.String({ pattern: VOLUME_ID_PATTERN }), '*': Type.String() });
const Query = Type.Object({
  expires: Type.Optional(Type.String({ description: 'Signed URLs: when the link expires (seconds since the epoch).' })),
  sig: Type.Optional(Type.String({ description: 'Signed URLs: the signature.' })),
  inline: Type.Optional(Type.Boolean({ description: 'Content-Disposition inline instead of attachment' })),
});

// Header schemas as @fastify/swagger takes them (it wraps each in a Header Object).
const FILE_HEADERS = {
  'content-length': { type: 'integer' },
  'content-disposition': {
    type: 'string',
    description: '`attachment` (`inline` with ?inline=true) and the file name.',
  },
  etag: { type: 'string' },
  'last-modified': { type: 'string' },
  'accept-ranges': { type: 'string', enum: ['bytes'] },
};
const BYTES = { '*/*': { schema: { type: 'string', format: 'binary' } } };
/** The route streams the file itself: the document says what it sends. */
const FILE_RESPONSES = {
  200: { description: 'The file; Content-Type is its own.', headers: FILE_HEADERS, content: BYTES },
  206: {
    description: 'The requested range of the file (Range).',
    headers: { ...FILE_HEADERS, 'content-range': { type: 'string' } },
    content: BYTES,
  },
  304: { type: 'null', description: 'Not modified (If-None-Match matched the ETag).' },
};

/** The parts of the two download routes' schemas that are the same. */
const DOWNLOAD_SCHEMA = {
  tags: ['files'],
  security: [{ bearer: [] }, {}] as Record<string, string[]>[],
  querystring: Query,
  response: {
    200: Type.Unsafe({ type: 'string', format: 'binary' }),
    206: Type.Unsafe({ type: 'string', format: 'binary' }),
    304: Type.Null(),
    400: ref(ProblemSchema),
    401: ref(ProblemSchema),
    404: ref(ProblemSchema),
    416: ref(ProblemSchema),
  },
};

type Query = { expires?: string; sig?: string; inline?: boolean };

/**
 * GET /files/<session>/<path> and GET /files/volumes/<volume>/<path>: a session's or a volume's file, authorised by
 * the owner's API key or by a signed, expiring URL. Files were written by hostile code, so they are opened without
 * following any symlink and served with headers that stop a browser from running them on this origin.
 */
export const downloadRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const { sessions, volumes, workspaces, signer } = deps;

  /** Checks the request may read `path` of `owner` (a session's or volume's id), whose tenant `tenantOf` answers. */
  const authorise = async (req: FastifyRequest, query: Query, owner: string, path: string) => {
    if (query.sig !== undefined) {
      if (!signer.verify(owner, path, query.expires, query.sig)) {
        throw new SandgateError(
          'unauthorized',
          'the download link is invalid or has expired; ask for a fresh download_url',
        );
      }
      return;
    }
    if (!req.tenant) {
      throw new SandgateError(
        'unauthorized',
        'send an API key as "Authorization: Bearer <key>", or use a signed download_url',
      );
    }
    const mine = owner.startsWith('vol_')
      ? (await volumes.byId(owner))?.tenant === req.tenant
      : (await sessions.get(req.tenant, owner)) !== null;
    if (!mine) throw new SandgateError('file_not_found', `no file ${path} in ${owner}`);
  };

  app.get(
    '/files/:session/*',
    {
      config: { public: true, openapi: { responses: FILE_RESPONSES } },
      schema: {
        ...DOWNLOAD_SCHEMA,
        operationId: 'downloadFile',
        summary: 'Download a file (API key or signed URL); supports Range, ETag and If-None-Match',
        description:
          "Authorised by the API key of the session's tenant, or by the `expires` and `sig` of a signed " +
          '`download_url` (then no key is needed). The body is the file, with its own Content-Type.',
        params: Params,
      },
    },
    async (req, reply) => {
      const { session } = req.params;
      const path = normalizeUserPath(wildcardPath(req.params['*']));
      await authorise(req, req.query, session, path);
      return sendFile(req, reply, req.query, { dir: workspaces.dir(session), path, owner: session });
    },
  );

  app.get(
    '/files/volumes/:volume/*',
    {
      config: { public: true, openapi: { responses: FILE_RESPONSES } },
      schema: {
        ...DOWNLOAD_SCHEMA,
        operationId: 'downloadVolumeFile',
        summary: "Download a volume's file (API key or signed URL); supports Range, ETag and If-None-Match",
        description:
          "The volume is named by its id (a volume's `id`), so a link never reaches a later volume of the same name. " +
          "Authorised by the API key of the volume's tenant, or by a signed `download_url`.",
        params: VolumeParams,
      },
    },
    async (req, reply) => {
      const { volume } = req.params;
      const path = normalizeUserPath(wildcardPath(req.params['*']));
      await authorise(req, req.query, volume, path);
      return sendFile(req, reply, req.query, { dir: workspaces.volumes.dir(volume), path, owner: volume });
    },
  );
};

/** Streams the file at `path` of `dir` with its headers, honouring If-None-Match and a single Range. */
async function sendFile(
  req: FastifyRequest,
  reply: FastifyReply,
  query: Query,
  { dir, path, owner }: { dir: string; path: string; owner: string },
) {
  let opened;
  try {
    opened = await openInside(dir, path);
  } catch (err) {
    if (err instanceof SandgateError) throw new SandgateError('file_not_found', `no file ${path} in ${owner}`);
    throw err;
  }
  const { handle, stat } = opened;
  const signed = query.sig !== undefined;
  try {
    const etag = `"${stat.ino.toString(36)}-${stat.size.toString(36)}-${Math.floor(stat.mtimeMs).toString(36)}"`;
    const filename = path.slice(path.lastIndexOf('/') + 1);
    reply.headers({
      'content-type': contentTypeFor(path),
      etag,
      'last-modified': stat.mtime.toUTCString(),
      'accept-ranges': 'bytes',
      'cache-control': signed ? 'private, max-age=300' : 'private, no-cache',
      'content-disposition': contentDisposition(filename, { type: query.inline ? 'inline' : 'attachment' }),
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'; sandbox",
    });
    if (req.headers['if-none-match']?.split(/\s*,\s*/).includes(etag)) {
      await handle.close();
      return reply.status(304).send(null);
    }
    let start = 0;
    let end = stat.size - 1;
    const ifRange = req.headers['if-range'];
    if (req.headers.range && (!ifRange || ifRange === etag)) {
      const ranges = rangeParser(stat.size, req.headers.range, { combine: true });
      if (ranges === -1) {
        reply.header('content-range', `bytes */${stat.size}`);
        throw new SandgateError('range_not_satisfiable', `the file is ${stat.size} bytes`);
      }
      // A malformed header (-2) or several ranges are answered with the whole file, as RFC 9110 allows.
      if (ranges !== -2 && ranges.length === 1) {
        start = ranges[0]!.start;
        end = ranges[0]!.end;
        reply.status(206).header('content-range', `bytes ${start}-${end}/${stat.size}`);
      }
    }
    reply.header('content-length', stat.size === 0 ? 0 : end - start + 1);
    if (stat.size === 0) {
      await handle.close();
      return reply.send(Buffer.alloc(0));
    }
    return reply.send(handle.createReadStream({ start, end, autoClose: true }));
  } catch (err) {
    await handle.close().catch(() => {});
    throw err;
  }
}
