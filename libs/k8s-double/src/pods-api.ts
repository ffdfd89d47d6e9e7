import { randomBytes } from 'node:crypto';
import { podSecurityViolations } from './admission.ts';
import type { ApiAnswer, ApiContext, ApiRequest } from './api-context.ts';
import { PodWorker } from './kubelet.ts';
import {
  clearServerFields,
  deleteOptions,
  existing,
  generateName,
  isDryRun,
  objectBody,
  queryFlag,
} from './objects.ts';
import { TOKEN_MOUNT_PATH, TOKEN_VOLUME_PREFIX } from './pod-mounts.ts';
import { containerFor, readLog, type LogQuery } from './pod-logs.ts';
import { k8sTime, qosClassOf } from './pod-status.ts';
import type { PodSpec } from './pod-types.ts';
import { admitPodSpec } from './pod-validation.ts';
import { listOrWatch } from './watch.ts';
import { POD_FIELDS } from './selectors.ts';
import { alreadyExists, badRequest, forbidden, methodNotSupported, notFound } from './status.ts';
import type { K8sObject } from './store.ts';

/** core/v1 pods: create, get, list, delete, and the log subresource. */
export async function podsApi(ctx: ApiContext, req: ApiRequest): Promise<ApiAnswer> {
  if (req.subresource === 'log' && req.method === 'GET') return podLog(ctx, req);
  if (req.subresource === 'status' && req.method === 'GET') return { status: 200, body: getPod(ctx, req) };
  if (req.subresource !== undefined) {
    // exec, attach and portforward need a connection upgrade; a plain request is refused as the API server does.
    if (['exec', 'attach', 'portforward'].includes(req.subresource)) throw badRequest('Upgrade request required');
    throw notFound(`pods/${req.subresource}`, req.name!);
  }
  if (req.name === undefined) {
    if (req.method === 'GET') return listOrWatch(ctx, 'Pod', req, POD_FIELDS);
    // Objects are created in a namespace; the cluster-wide collection only lists.
    if (req.method === 'POST' && req.namespace !== undefined) return createPod(ctx, req);
    throw methodNotSupported('pods', req.method === 'DELETE' ? 'deletecollection' : req.method);
  }
  if (req.method === 'GET') return { status: 200, body: getPod(ctx, req) };
  if (req.method === 'DELETE') return { status: 200, body: await deletePod(ctx, req) };
  throw methodNotSupported('pods', req.method === 'PUT' ? 'update' : req.method.toLowerCase());
}

function getPod(ctx: ApiContext, req: ApiRequest): K8sObject {
  const pod = ctx.store.get('Pod', req.namespace!, req.name!);
  if (!pod) throw notFound('pods', req.name!);
  return pod;
}

async function createPod(ctx: ApiContext, req: ApiRequest): Promise<ApiAnswer> {
  const pod = objectBody('Pod', req);
  if (!ctx.namespaces.has(req.namespace!)) throw notFound('namespaces', req.namespace!);
  clearServerFields(pod);
  generateName(pod);
  admitPodSpec(pod);
  const spec = pod.spec as PodSpec;
  const name = pod.metadata.name!;
  admit(ctx, req.namespace!, name, spec);
  if (ctx.store.get('Pod', req.namespace!, name)) throw alreadyExists('pods', name);
  injectToken(spec);
  pod.status = { phase: 'Pending', qosClass: qosClassOf([...(spec.initContainers ?? []), ...spec.containers]) };
  if (isDryRun(req)) return { status: 201, body: pod };
  const stored = ctx.store.insert('Pod', pod);
  ctx.workers.set(stored.metadata.uid!, new PodWorker(ctx.node, stored));
  return { status: 201, body: stored };
}

/** The admission chain after validation: RuntimeClass, Pod Security, then the namespace's ResourceQuota. */
function admit(ctx: ApiContext, namespace: string, name: string, spec: PodSpec): void {
  if (spec.runtimeClassName !== undefined && !(spec.runtimeClassName in ctx.node.settings.runtimeClasses)) {
    throw forbidden('pods', name, `pod rejected: RuntimeClass "${spec.runtimeClassName}" not found`);
  }
  const violations = podSecurityViolations(spec, ctx.podSecurity);
  if (violations.length)
    throw forbidden('pods', name, `violates PodSecurity "${ctx.podSecurity}:latest": ${violations.join(', ')}`);
  const limit = ctx.quota.pods;
  if (limit !== undefined) {
    const used = ctx.store
      .list('Pod', namespace)
      .filter((p) => !['Succeeded', 'Failed'].includes(String((p.status as { phase?: string })?.phase))).length;
    if (used + 1 > limit) {
      throw forbidden(
        'pods',
        name,
        `exceeded quota: sandbox-quota, requested: pods=1, used: pods=${used}, limited: pods=${limit}`,
      );
    }
  }
}

/** What the ServiceAccount admission adds unless automountServiceAccountToken is false: a token in every container. */
function injectToken(spec: PodSpec): void {
  if (spec.automountServiceAccountToken === false) return;
  const name = `${TOKEN_VOLUME_PREFIX}${randomBytes(3).toString('hex').slice(0, 5)}`;
  spec.volumes = [
    ...(spec.volumes ?? []),
    { name, projected: { defaultMode: 0o644, sources: [{ serviceAccountToken: { path: 'token' } }] } },
  ];
  for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
    c.volumeMounts = [...(c.volumeMounts ?? []), { name, mountPath: TOKEN_MOUNT_PATH, readOnly: true }];
  }
}

/**
 * The pod registry's delete: immediate for grace 0, an unscheduled Pod or a terminal one (the next GET is 404);
 * otherwise the Pod lingers with a deletionTimestamp while the kubelet stops its containers, then goes.
 */
async function deletePod(ctx: ApiContext, req: ApiRequest): Promise<K8sObject> {
  const opts = deleteOptions(req);
  const pod = existing(ctx, 'Pod', req, opts.preconditions);
  const spec = pod.spec as PodSpec;
  const phase = (pod.status as { phase?: string } | undefined)?.phase;
  const grace = opts.gracePeriodSeconds ?? spec.terminationGracePeriodSeconds ?? 30;
  const immediate = grace === 0 || !spec.nodeName || phase === 'Succeeded' || phase === 'Failed';
  if (isDryRun(req)) return pod;
  if (opts.propagationPolicy === 'Orphan') orphanDependents(ctx, pod.metadata.uid!);
  if (pod.metadata.deletionTimestamp !== undefined && !immediate) return pod;
  const marked = ctx.store.update('Pod', req.namespace!, req.name!, (o) => {
    o.metadata.deletionTimestamp ??= k8sTime(Date.now() + grace * 1000);
    o.metadata.deletionGracePeriodSeconds = grace;
  })!;
  const worker = ctx.workers.get(pod.metadata.uid!);
  if (immediate || !worker) {
    ctx.removeNow('Pod', req.namespace!, req.name!);
    return marked;
  }
  void worker.terminate(grace).then(() => ctx.removeNow('Pod', req.namespace!, req.name!));
  return marked;
}

function orphanDependents(ctx: ApiContext, uid: string): void {
  for (const kind of ['Pod', 'Secret'] as const) {
    for (const o of ctx.store.list(kind)) {
      if (!o.metadata.ownerReferences?.some((r) => r.uid === uid)) continue;
      ctx.store.update(kind, o.metadata.namespace!, o.metadata.name!, (x) => {
        x.metadata.ownerReferences = x.metadata.ownerReferences!.filter((r) => r.uid !== uid);
      });
    }
  }
}

async function podLog(ctx: ApiContext, req: ApiRequest): Promise<ApiAnswer> {
  const pod = getPod(ctx, req);
  const q = req.query;
  const int = (key: string, min: number): number | undefined => {
    const raw = q.get(key);
    if (raw === null) return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min)
      throw badRequest(`${key}: Invalid value: ${raw}: must be greater than or equal to ${min}`);
    return n;
  };
  const query: LogQuery = {
    ...(q.has('container') ? { container: q.get('container')! } : {}),
    limitBytes: int('limitBytes', 1),
    tailLines: int('tailLines', 0),
    sinceSeconds: int('sinceSeconds', 1),
    ...(q.has('sinceTime') ? { sinceTime: q.get('sinceTime')! } : {}),
    timestamps: queryFlag(q, 'timestamps'),
    previous: queryFlag(q, 'previous'),
    follow: queryFlag(q, 'follow'),
  };
  if (query.sinceSeconds !== undefined && query.sinceTime !== undefined)
    throw badRequest('at most one of sinceTime or sinceSeconds may be specified');
  const container = containerFor(pod, query.container);
  const worker = ctx.workers.get(pod.metadata.uid!);
  if (!worker) throw notFound('pods', req.name!);
  const body = await readLog(worker, pod, container, query, ctx.logView);
  if (Buffer.isBuffer(body)) return { status: 200, body, contentType: 'text/plain' };
  return { status: 200, body: undefined, stream: body, contentType: 'text/plain' };
}
