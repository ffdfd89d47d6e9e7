import { randomInt } from 'node:crypto';
import type { ApiContext, ApiRequest } from './api-context.ts';
import { paginate } from './paging.ts';
import { fieldMatcher, labelMatcher } from './selectors.ts';
import { badRequest, conflict, notFound } from './status.ts';
import type { K8sObject, Kind } from './store.ts';

/** The lower-case plural the API server uses in messages and URLs. */
export const RESOURCE: Record<Kind, string> = { Pod: 'pods', Secret: 'secrets', Event: 'events' };

/** The JSON body of a create or replace, as a metadata-bearing object; anything else is a 400. */
export function objectBody(kind: Kind, req: ApiRequest): K8sObject {
  const body = req.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw badRequest(`${kind} in version "v1" cannot be handled as a ${kind}: the body is not a JSON object`);
  }
  const obj = structuredClone(body) as K8sObject;
  obj.metadata ??= {};
  if (obj.metadata.namespace !== undefined && obj.metadata.namespace !== req.namespace) {
    throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
  }
  obj.metadata.namespace = req.namespace;
  obj.apiVersion = 'v1';
  obj.kind = kind;
  return obj;
}

/** metadata.generateName + five characters of the API server's alphabet (no vowels, no confusable digits). */
export function generateName(obj: K8sObject): void {
  if (obj.metadata.name !== undefined || obj.metadata.generateName === undefined) return;
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  obj.metadata.name =
    obj.metadata.generateName + Array.from({ length: 5 }, () => alphabet[randomInt(alphabet.length)]).join('');
}

/** Fields the server owns: whatever a client sends for them is replaced. */
export function clearServerFields(obj: K8sObject): void {
  for (const f of [
    'uid',
    'resourceVersion',
    'creationTimestamp',
    'deletionTimestamp',
    'deletionGracePeriodSeconds',
    'generation',
  ] as const) {
    delete obj.metadata[f];
  }
}

export const isDryRun = (req: ApiRequest): boolean => req.query.getAll('dryRun').includes('All');

/** A boolean query parameter as the API server decodes one: absent, `0` or `false` is false, anything else true. */
export function queryFlag(query: URLSearchParams, key: string): boolean {
  const raw = query.get(key);
  return raw !== null && !['0', 'false'].includes(raw.toLowerCase());
}

/** Which objects a list or watch selects: its namespace (or all), labelSelector and fieldSelector. */
export function selection(req: ApiRequest, fields: readonly string[]): (obj: K8sObject) => boolean {
  const byLabel = labelMatcher(req.query.get('labelSelector') ?? undefined);
  const byField = fieldMatcher(req.query.get('fieldSelector') ?? undefined, fields);
  return (o) =>
    (req.namespace === undefined || o.metadata.namespace === req.namespace) && byLabel(o.metadata.labels) && byField(o);
}

/** A list answer (PodList, SecretList, EventList) with selectors and limit/continue applied. */
export function listObjects(
  ctx: ApiContext,
  kind: Kind,
  req: ApiRequest,
  fields: readonly string[],
): Record<string, unknown> {
  const all = ctx.store.list(kind, req.namespace).filter(selection(req, fields));
  const rv = Number(ctx.store.resourceVersion);
  const key = (o: K8sObject) => `${o.metadata.namespace}/${o.metadata.name}`;
  const page = paginate(all, key, req.query, rv, ctx.continueExpiredBefore);
  return {
    kind: `${kind}List`,
    apiVersion: 'v1',
    metadata: {
      resourceVersion: String(rv),
      ...(page.continue ? { continue: page.continue, remainingItemCount: page.remainingItemCount } : {}),
    },
    items: page.items,
  };
}

/** DeleteOptions from the query and the body alike; the query wins, as in the API server's decoding. */
export interface DeleteOptions {
  gracePeriodSeconds?: number;
  propagationPolicy?: 'Orphan' | 'Background' | 'Foreground';
  preconditions?: { uid?: string; resourceVersion?: string };
}

export function deleteOptions(req: ApiRequest): DeleteOptions {
  const body = (req.body && typeof req.body === 'object' ? req.body : {}) as DeleteOptions;
  const q = req.query;
  const grace = q.get('gracePeriodSeconds') ?? body.gracePeriodSeconds;
  const policy = q.get('propagationPolicy') ?? body.propagationPolicy;
  if (policy !== undefined && !['Orphan', 'Background', 'Foreground'].includes(policy)) {
    throw badRequest(`propagationPolicy: Unsupported value: "${policy}"`);
  }
  const gracePeriodSeconds = grace === undefined ? undefined : Number(grace);
  if (gracePeriodSeconds !== undefined && !Number.isInteger(gracePeriodSeconds))
    throw badRequest(`invalid gracePeriodSeconds: ${grace}`);
  return {
    ...(gracePeriodSeconds === undefined ? {} : { gracePeriodSeconds: Math.max(0, gracePeriodSeconds) }),
    ...(policy === undefined ? {} : { propagationPolicy: policy as DeleteOptions['propagationPolicy'] }),
    ...(body.preconditions ? { preconditions: body.preconditions } : {}),
  };
}

/** The stored object a delete or replace is about, after its preconditions hold. */
export function existing(
  ctx: ApiContext,
  kind: Kind,
  req: ApiRequest,
  pre?: DeleteOptions['preconditions'],
): K8sObject {
  const obj = ctx.store.get(kind, req.namespace!, req.name!);
  if (!obj) throw notFound(RESOURCE[kind], req.name!);
  if (pre?.uid !== undefined && pre.uid !== obj.metadata.uid) {
    throw conflict(
      RESOURCE[kind],
      req.name!,
      `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${obj.metadata.uid}`,
    );
  }
  if (pre?.resourceVersion !== undefined && pre.resourceVersion !== obj.metadata.resourceVersion) {
    throw conflict(
      RESOURCE[kind],
      req.name!,
      `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ` +
        `ResourceVersion in object meta: ${obj.metadata.resourceVersion}`,
    );
  }
  return obj;
}
