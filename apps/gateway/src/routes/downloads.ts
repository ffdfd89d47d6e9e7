import { Type } from '@sinclair/typebox';
import { create as contentDisposition } from 'content-disposition';
import rangeParser from 'range-parser';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ProblemSchema, SESSION_ID_PATTERN, SandgateError, ref } from '@sandgate/contracts';
import { contentTypeFor, normalizeUserPath, openInside } from '@sandgate/storage';
import type { GatewayDeps } from '../deps.ts';
import { wildcardPath } from './wildcard.ts';

const Params = Type.Object({ session: Type.String({ pattern: SESSION_ID_PATTERN }), '*': Type.String() });
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

/**
 * GET /files/<session>/<path>: a session's file, authorised by the owner's API key or by a signed,
 * expiring URL. Files were written by hostile code, so they are opened without following any
 * symlink and served with headers that stop a browser from running them on this origin.
 */
export const downloadRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const { sessions, workspaces, signer } = deps;

  app.get(
    '/files/:session/*',
    {
      config: { public: true, openapi: { responses: FILE_RESPONSES } },
      schema: {
        operationId: 'downloadFile',
        tags: ['files'],
        summary: 'Download a file (API key or signed URL); supports Range, ETag and If-None-Match',
        description:
          "Authorised by the API key of the session's tenant, or by the `expires` and `sig` of a signed " +
          '`download_url` (then no key is needed). The body is the file, with its own Content-Type.',
        security: [{ bearer: [] }, {}],
        params: Params,
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
      },
    },
    async (req, reply) => {
      const { session } = req.params;
      const path = normalizeUserPath(wildcardPath(req.params['*']));
      const signed = req.query.sig !== undefined;
      if (signed) {
        if (!signer.verify(session, path, req.query.expires, req.query.sig)) {
          throw new SandgateError(
            'unauthorized',
            'the download link is invalid or has expired; ask for a fresh download_url',
          );
        }
      } else {
        if (!req.tenant)
          throw new SandgateError(
            'unauthorized',
            'send an API key as "Authorization: Bearer <key>", or use a signed download_url',
          );
        if (!(await sessions.get(req.tenant, session)))
          throw new SandgateError('file_not_found', `no file ${path} in session ${session}`);
      }
      let opened;
      try {
        opened = await openInside(workspaces.dir(session), path);
      } catch (err) {
        if (err instanceof SandgateError)
          throw new SandgateError('file_not_found', `no file ${path} in session ${session}`);
        throw err;
      }
      const { handle, stat } = opened;
      try {
        const etag = `"${stat.ino.toString(36)}-${stat.size.toString(36)}-${Math.floor(stat.mtimeMs).toString(36)}"`;
        const filename = path.slice(path.lastIndexOf('/') + 1);
        reply.headers({
          'content-type': contentTypeFor(path),
          etag,
          'last-modified': stat.mtime.toUTCString(),
          'accept-ranges': 'bytes',
          'cache-control': signed ? 'private, max-age=300' : 'private, no-cache',
          'content-disposition': contentDisposition(filename, { type: req.query.inline ? 'inline' : 'attachment' }),
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
    },
  );
};
