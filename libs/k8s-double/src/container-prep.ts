import type Dockerode from 'dockerode';
import { effectiveSecurity, nonRootViolation } from './container-config.ts';
import type { NodeContext } from './node-context.ts';
import type { Container } from './pod-types.ts';
import type { K8sObject } from './store.ts';

/** Why the kubelet cannot start a container yet: the `waiting` reason and message it reports meanwhile. */
export interface Blocker {
  reason: string;
  message: string;
}

/** An image reference as the runtime parses it: [registry[:port]/]path[:tag][@sha256:digest], lower-case path. */
const COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const REFERENCE = new RegExp(
  `^(?:[a-zA-Z0-9.-]+(?::\\d+)?/)?${COMPONENT}(?:/${COMPONENT})*(?::\\w[\\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$`,
);

/** Images found on the engine, by reference → their USER: once present an image stays (the double removes none). */
const present = new WeakMap<Dockerode, Map<string, string>>();

/** The image's USER, or undefined when the engine does not have the image (the double never pulls). */
export async function imageUser(docker: Dockerode, image: string): Promise<string | undefined> {
  let known = present.get(docker);
  if (!known) present.set(docker, (known = new Map()));
  const cached = known.get(image);
  if (cached !== undefined) return cached;
  try {
    const user = (await docker.getImage(image).inspect()).Config?.User ?? '';
    known.set(image, user);
    return user;
  } catch {
    return undefined;
  }
}

/**
 * What stands between a container and its start, checked in the kubelet's order: a scenario's forced reason,
 * the image reference, the image itself, then the container's config (runAsNonRoot, env from Secrets).
 */
export async function blockerOf(
  ctx: NodeContext,
  pod: K8sObject,
  c: Container,
  previous?: Blocker,
): Promise<Blocker | undefined> {
  const forced = ctx.scenarios.forcedWaiting(pod, c.name);
  if (forced) return forced;
  if (!REFERENCE.test(c.image)) {
    return {
      reason: 'InvalidImageName',
      message:
        `Failed to apply default image tag "${c.image}": ` +
        `couldn't parse image reference "${c.image}": invalid reference format`,
    };
  }
  const user = await imageUser(ctx.docker, c.image);
  if (user === undefined) {
    // ErrImagePull on the first try, ImagePullBackOff while the kubelet waits to try again.
    if (previous?.reason === 'ErrImagePull')
      return { reason: 'ImagePullBackOff', message: `Back-off pulling image "${c.image}"` };
    return {
      reason: 'ErrImagePull',
      message: `rpc error: code = NotFound desc = failed to pull and unpack image "${c.image}": not found`,
    };
  }
  const spec = pod.spec as Parameters<typeof effectiveSecurity>[0];
  const nonRoot = nonRootViolation(
    effectiveSecurity(spec, c),
    user,
    `${pod.metadata.name}_${pod.metadata.namespace}(${pod.metadata.uid})`,
    c.name,
  );
  if (nonRoot) return { reason: 'CreateContainerConfigError', message: nonRoot };
  const env = resolveEnv(ctx, pod, c);
  return typeof env === 'string' ? { reason: 'CreateContainerConfigError', message: env } : undefined;
}

/**
 * The container's environment as the kubelet builds it: the API server's service variables, then the
 * container's own, with Secret keys and downward-API fields resolved. A string is the config error instead.
 */
export function resolveEnv(ctx: NodeContext, pod: K8sObject, c: Container): Record<string, string> | string {
  const ns = pod.metadata.namespace!;
  const { host, port } = ctx.apiServer;
  const env: Record<string, string> = {
    KUBERNETES_SERVICE_HOST: host,
    KUBERNETES_SERVICE_PORT: String(port),
    KUBERNETES_SERVICE_PORT_HTTPS: String(port),
    KUBERNETES_PORT: `tcp://${host}:${port}`,
  };
  const status = (pod.status ?? {}) as Record<string, unknown>;
  const fields: Record<string, unknown> = {
    'metadata.name': pod.metadata.name,
    'metadata.namespace': ns,
    'metadata.uid': pod.metadata.uid,
    'spec.nodeName': ctx.nodeName,
    'spec.serviceAccountName': (pod.spec as { serviceAccountName?: string }).serviceAccountName,
    'status.podIP': status.podIP,
    'status.hostIP': ctx.network.hostIP,
  };
  for (const e of c.env ?? []) {
    if (e.valueFrom?.secretKeyRef) {
      const { name, key, optional } = e.valueFrom.secretKeyRef;
      const secret = ctx.store.get('Secret', ns, name);
      const value = (secret?.data as Record<string, string> | undefined)?.[key];
      if (value === undefined) {
        if (optional) continue;
        return secret ? `couldn't find key ${key} in Secret ${ns}/${name}` : `secret "${name}" not found`;
      }
      env[e.name] = Buffer.from(value, 'base64').toString('utf8');
    } else if (e.valueFrom?.fieldRef) {
      env[e.name] = String(fields[e.valueFrom.fieldRef.fieldPath] ?? '');
    } else {
      env[e.name] = e.value ?? '';
    }
  }
  return env;
}
