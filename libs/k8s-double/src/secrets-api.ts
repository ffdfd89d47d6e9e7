import type { ApiAnswer, ApiContext, ApiRequest } from './api-context.ts';
import { clearServerFields, deleteOptions, existing, generateName, isDryRun, objectBody } from './objects.ts';
import { listOrWatch } from './watch.ts';
import { admitSecret } from './secret-validation.ts';
import { EVENT_FIELDS, SECRET_FIELDS } from './selectors.ts';
import { alreadyExists, badRequest, conflict, methodNotSupported, notFound, success } from './status.ts';

/** core/v1 secrets: create, get, list, replace (PUT) and delete. */
export async function secretsApi(ctx: ApiContext, req: ApiRequest): Promise<ApiAnswer> {
  if (req.subresource !== undefined) throw notFound(`secrets/${req.subresource}`, req.name!);
  if (req.name === undefined) {
    if (req.method === 'GET') return listOrWatch(ctx, 'Secret', req, SECRET_FIELDS);
    if (req.method === 'POST' && req.namespace !== undefined) return createSecret(ctx, req);
    throw methodNotSupported('secrets', req.method === 'DELETE' ? 'deletecollection' : req.method);
  }
  switch (req.method) {
    case 'GET': {
      const s = ctx.store.get('Secret', req.namespace!, req.name);
      if (!s) throw notFound('secrets', req.name);
      return { status: 200, body: s };
    }
    case 'PUT':
      return replaceSecret(ctx, req);
    case 'DELETE': {
      const opts = deleteOptions(req);
      const s = existing(ctx, 'Secret', req, opts.preconditions);
      if (!isDryRun(req)) ctx.removeNow('Secret', req.namespace!, req.name);
      return { status: 200, body: success('secrets', req.name, s.metadata.uid!) };
    }
    default:
      throw methodNotSupported('secrets', req.method.toLowerCase());
  }
}

function createSecret(ctx: ApiContext, req: ApiRequest): ApiAnswer {
  const secret = objectBody('Secret', req);
  if (!ctx.namespaces.has(req.namespace!)) throw notFound('namespaces', req.namespace!);
  clearServerFields(secret);
  generateName(secret);
  admitSecret(secret);
  if (ctx.store.get('Secret', req.namespace!, secret.metadata.name!))
    throw alreadyExists('secrets', secret.metadata.name!);
  if (isDryRun(req)) return { status: 201, body: secret };
  return { status: 201, body: ctx.store.insert('Secret', secret) };
}

/** PUT: a full replace; a stale resourceVersion is a 409 Conflict, the uid and creation time stay. */
function replaceSecret(ctx: ApiContext, req: ApiRequest): ApiAnswer {
  const secret = objectBody('Secret', req);
  if (secret.metadata.name !== req.name) {
    throw badRequest(
      `the name of the object (${secret.metadata.name}) does not match the name on the URL (${req.name})`,
    );
  }
  const current = ctx.store.get('Secret', req.namespace!, req.name!);
  if (!current) throw notFound('secrets', req.name!);
  const rv = secret.metadata.resourceVersion;
  if (rv !== undefined && rv !== '' && rv !== current.metadata.resourceVersion) {
    throw conflict(
      'secrets',
      req.name!,
      'the object has been modified; please apply your changes to the latest version and try again',
    );
  }
  admitSecret(secret, current);
  if (isDryRun(req)) return { status: 200, body: { ...secret, metadata: { ...current.metadata, ...secret.metadata } } };
  const updated = ctx.store.update('Secret', req.namespace!, req.name!, (o) => {
    const keep = { uid: o.metadata.uid, creationTimestamp: o.metadata.creationTimestamp };
    for (const k of Object.keys(o)) delete o[k];
    Object.assign(o, secret, { metadata: { ...secret.metadata, ...keep } });
  })!;
  return { status: 200, body: updated };
}

/** core/v1 events: list only (what a backend reads to explain a Pending Pod). */
export async function eventsApi(ctx: ApiContext, req: ApiRequest): Promise<ApiAnswer> {
  if (req.method !== 'GET') throw methodNotSupported('events', req.method.toLowerCase());
  if (req.name !== undefined) {
    const e = ctx.store.get('Event', req.namespace!, req.name);
    if (!e) throw notFound('events', req.name);
    return { status: 200, body: e };
  }
  return listOrWatch(ctx, 'Event', req, EVENT_FIELDS);
}
