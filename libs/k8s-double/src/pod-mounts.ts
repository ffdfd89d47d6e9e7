import { randomBytes } from 'node:crypto';
import type { PodRef } from './docker-labels.ts';
import type { NodeContext } from './node-context.ts';
import type { PodSpec, Volume } from './pod-types.ts';
import { createEmptyDir, createFilesVolume, type PodVolume, type VolumeFiles } from './pod-volumes.ts';
import type { K8sObject } from './store.ts';

/** The volume the ServiceAccount admission adds when automountServiceAccountToken is not false. */
export const TOKEN_VOLUME_PREFIX = 'kube-api-access-';
export const TOKEN_MOUNT_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * Sets up every volume of the Pod into `into`, as the kubelet's volume manager does before any container starts.
 * A Secret that does not exist (or lacks a key) blocks the Pod in ContainerCreating with FailedMount events, retried
 * until it appears or the Pod ends. Answers whether the Pod may go on.
 */
export async function mountVolumes(
  ctx: NodeContext,
  pod: K8sObject,
  ref: PodRef,
  into: Map<string, PodVolume>,
  ended: () => boolean,
  report: (reason: string, message: string) => void,
): Promise<boolean> {
  const spec = pod.spec as PodSpec;
  const fsGroup = spec.securityContext?.fsGroup;
  for (const v of spec.volumes ?? []) {
    if (ended()) return false;
    if (v.emptyDir) {
      into.set(v.name, await createEmptyDir(ctx.docker, ref, v, fsGroup));
      continue;
    }
    let files: VolumeFiles | string;
    let announced = '';
    while (typeof (files = filesOf(ctx, pod, v)) === 'string') {
      if (ended()) return false;
      if (files !== announced) report('FailedMount', files);
      announced = files;
      await ctx.scenarios.nap(ctx.settings.retryMs);
    }
    into.set(v.name, await createFilesVolume(ctx.docker, ref, v.name, files, fsGroup));
  }
  return !ended();
}

/** The files a Secret or token volume holds, or the FailedMount message while it cannot be set up. */
function filesOf(ctx: NodeContext, pod: K8sObject, v: Volume): VolumeFiles | string {
  const files: VolumeFiles = new Map();
  if (v.name.startsWith(TOKEN_VOLUME_PREFIX) && v.projected) {
    // A stand-in token: nothing accepts it, but a Pod that should have none can be caught holding one.
    files.set('token', { data: Buffer.from(`k8s-double.${randomBytes(24).toString('base64url')}`), mode: 0o644 });
    files.set('ca.crt', { data: Buffer.from('k8s-double has no certificate authority\n'), mode: 0o644 });
    files.set('namespace', { data: Buffer.from(pod.metadata.namespace!), mode: 0o644 });
    return files;
  }
  const src = v.secret!;
  const name = src.secretName ?? '';
  const secret = ctx.store.get('Secret', pod.metadata.namespace!, name);
  const fail = (why: string) => `MountVolume.SetUp failed for volume "${v.name}" : ${why}`;
  if (!secret) return src.optional ? files : fail(`secret "${name}" not found`);
  const data = (secret.data ?? {}) as Record<string, string>;
  const mode = src.defaultMode ?? 0o644;
  if (!src.items) {
    for (const [key, value] of Object.entries(data)) files.set(key, { data: Buffer.from(value, 'base64'), mode });
    return files;
  }
  for (const item of src.items) {
    const value = data[item.key];
    if (value === undefined) {
      if (src.optional) continue;
      return fail(`references non-existent secret key: ${item.key}`);
    }
    files.set(item.path, { data: Buffer.from(value, 'base64'), mode: item.mode ?? mode });
  }
  return files;
}
