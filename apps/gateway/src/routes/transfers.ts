import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { SandgateError } from '@sandgate/contracts';
import type { TransferGrant } from '@sandgate/state';
import { normalizeUserPath, openInside, removeInside, walkTree } from '@sandgate/storage';
import type { FastifyRequest } from 'fastify';
import type { GatewayDeps } from '../deps.ts';
import { wildcardPath } from './wildcard.ts';

/** The header a sandbox Pod's stage and harvest containers send their transfer token in. */
export const TRANSFER_HEADER = 'x-sandgate-transfer';
/** The most files one stage lists: what a session may hold for a Pod to fetch. */
const MAX_STAGED_FILES = 100_000;

const PathParams = Type.Object({ '*': Type.String() });
// Internal: the Kubernetes backend's own protocol, not part of the public API document.
const INTERNAL = { hide: true } as const;

/**
 * /internal/transfer: where a sandbox Pod's stage container fetches the session's files before a run and its harvest
 * container sends back what the run wrote or removed (the Kubernetes backend; docs/kubernetes.md). Each request
 * carries the execution's transfer token, which grants exactly one session's files until the run ends; the paths
 * come from hostile code and are checked as a client's are, and every write counts against the same quotas.
 */
export const transferRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const { transfers, workspaces } = deps;
  const files = deps.sessionFiles;

  const grantOf = async (req: FastifyRequest): Promise<TransferGrant> => {
    const token = req.headers[TRANSFER_HEADER];
    const grant = typeof token === 'string' ? await transfers.resolve(token) : undefined;
    if (grant === undefined)
      throw new SandgateError('unauthorized', 'the transfer token is missing, invalid or expired');
    return grant;
  };
  // The session must still exist: a Pod still running after its session was deleted must not bring its files back.
  const dirOf = async (grant: TransferGrant) => {
    await deps.sessions.require(grant.tenant, grant.session_id);
    return workspaces.create(grant.session_id);
  };
  const config = { public: true };

  app.get('/files', { config, schema: { ...INTERNAL } }, async (req) => {
    const dir = await dirOf(await grantOf(req));
    const { entries, truncated } = await walkTree(dir, { maxEntries: MAX_STAGED_FILES });
    return { files: entries.map((e) => ({ path: e.path, size: e.size, mtime_ms: Math.floor(e.mtimeMs) })), truncated };
  });

  app.get('/files/*', { config, schema: { ...INTERNAL, params: PathParams } }, async (req, reply) => {
    const dir = await dirOf(await grantOf(req));
    const path = normalizeUserPath(wildcardPath(req.params['*']));
    const { handle, stat } = await openInside(dir, path).catch((err: unknown) => {
      throw err instanceof SandgateError ? new SandgateError('file_not_found', `no file ${path} in the session`) : err;
    });
    reply.header('content-type', 'application/octet-stream').header('content-length', stat.size);
    if (stat.size === 0) {
      await handle.close();
      return reply.send(Buffer.alloc(0));
    }
    return reply.send(handle.createReadStream({ autoClose: true }));
  });

  app.delete('/files/*', { config, schema: { ...INTERNAL, params: PathParams } }, async (req, reply) => {
    const grant = await grantOf(req);
    await removeInside(await dirOf(grant), normalizeUserPath(wildcardPath(req.params['*'])));
    await files.recordUsage(grant.tenant, grant.session_id);
    return reply.status(204).send();
  });

  await app.register(async (instance) => {
    const raw = instance.withTypeProvider<TypeBoxTypeProvider>();
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
    raw.put('/files/*', { config, schema: { ...INTERNAL, params: PathParams } }, async (req, reply) => {
      const grant = await grantOf(req);
      // What a run wrote is bounded as on every backend: by the session's disk quota, not by the upload limit nor
      // the tenant's storage quota (checked before the run; what the run wrote then counts against it).
      const maxBytes = deps.config.sessionDiskBytes > 0 ? deps.config.sessionDiskBytes : Number.MAX_SAFE_INTEGER;
      const entry = await files.store(
        grant.tenant,
        grant.session_id,
        await dirOf(grant),
        wildcardPath(req.params['*']),
        req.raw,
        true,
        { maxBytes, tenantQuota: false },
      );
      return reply.status(201).send({ path: entry.path, size: entry.size_bytes });
    });
  });
};
