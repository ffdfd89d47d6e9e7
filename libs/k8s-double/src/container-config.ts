import type Dockerode from 'dockerode';
import { dockerName, podLabels, type PodRef } from './docker-labels.ts';
import type { Container, PodSpec, SecurityContext } from './pod-types.ts';
import type { PodVolume } from './pod-volumes.ts';
import { parseQuantity } from './quantity.ts';

/** Where a Pod's containers live on the engine: the pause container's network, or none (gVisor). */
export interface Sandbox {
  /** `container:<pause id>` to share the Pod's network namespace, or `none`. */
  networkMode: string;
  /** Docker runtime (`runsc` for runtimeClassName gvisor); undefined for the engine's default. */
  runtime?: string;
  /** The kubelet's --pod-max-pids, applied per container. */
  pidsLimit?: number;
}

export interface ContainerInputs {
  ref: PodRef;
  spec: PodSpec;
  container: Container;
  volumes: Map<string, PodVolume>;
  /** Resolved environment: literal values and those from Secrets and the downward API. */
  env: Record<string, string>;
  /** The image's own USER, for runAsGroup without runAsUser. */
  imageUser: string;
  sandbox: Sandbox;
  /** Bytes of json-file log the engine keeps per container before dropping (beyond the kubelet's rotation). */
  logMaxBytes: number;
  /** Which run of the container this is (its restart count): each run is a new engine container. */
  attempt?: number;
}

/** The effective security context: the container's fields over the Pod's, as the kubelet merges them. */
export function effectiveSecurity(spec: PodSpec, c: Container): SecurityContext {
  return { ...(spec.securityContext ?? {}), ...(c.securityContext ?? {}) };
}

/** `uid[:gid]` as Docker's User takes it, or undefined to keep the image's. */
export function dockerUser(sc: SecurityContext, imageUser: string): string | undefined {
  if (sc.runAsUser === undefined && sc.runAsGroup === undefined) return undefined;
  const uid = sc.runAsUser ?? (imageUser.split(':')[0] || '0');
  return sc.runAsGroup === undefined ? String(uid) : `${uid}:${sc.runAsGroup}`;
}

/** Create options for one Kubernetes container, mapped field by field onto the engine's equivalents. */
export function containerCreateOptions(i: ContainerInputs): Dockerode.ContainerCreateOptions {
  const { container: c, spec, sandbox } = i;
  const sc = effectiveSecurity(spec, c);
  const user = dockerUser(sc, i.imageUser);
  const limits = c.resources?.limits ?? {};
  const requests = c.resources?.requests ?? {};
  const memory = limits.memory === undefined ? undefined : Math.floor(parseQuantity(limits.memory));
  const cpu = limits.cpu === undefined ? undefined : parseQuantity(limits.cpu);
  const securityOpt: string[] = [];
  if (sc.allowPrivilegeEscalation === false) securityOpt.push('no-new-privileges');
  // Unset or Unconfined is unconfined on a kubelet without --seccomp-default; RuntimeDefault is the engine's profile.
  if (sc.seccompProfile?.type !== 'RuntimeDefault') securityOpt.push('seccomp=unconfined');
  const groups = [...(sc.fsGroup === undefined ? [] : [sc.fsGroup]), ...(sc.supplementalGroups ?? [])].map(String);
  return {
    name: dockerName(i.ref, i.attempt ? `${c.name}-${i.attempt}` : c.name),
    Image: c.image,
    // command replaces the image's ENTRYPOINT and drops its CMD; args replace CMD.
    ...(c.command ? { Entrypoint: c.command, Cmd: c.args ?? [] } : c.args ? { Cmd: c.args } : {}),
    ...(c.workingDir ? { WorkingDir: c.workingDir } : {}),
    ...(user === undefined ? {} : { User: user }),
    Env: Object.entries(i.env).map(([k, v]) => `${k}=${v}`),
    Labels: podLabels(i.ref, c.name),
    Tty: false,
    HostConfig: {
      NetworkMode: sandbox.networkMode,
      ReadonlyRootfs: sc.readOnlyRootFilesystem === true,
      CapDrop: sc.capabilities?.drop ?? [],
      CapAdd: sc.capabilities?.add ?? [],
      Privileged: sc.privileged === true,
      SecurityOpt: securityOpt,
      ...(groups.length ? { GroupAdd: groups } : {}),
      ...(memory === undefined ? {} : { Memory: memory, MemorySwap: memory }),
      ...(cpu === undefined ? {} : { NanoCpus: Math.round(cpu * 1e9) }),
      ...(requests.cpu === undefined ? {} : { CpuShares: Math.max(2, Math.round(parseQuantity(requests.cpu) * 1024)) }),
      ...(sandbox.pidsLimit === undefined ? {} : { PidsLimit: sandbox.pidsLimit }),
      Mounts: (c.volumeMounts ?? []).map((m) => {
        const v = i.volumes.get(m.name)!;
        return {
          Type: 'volume' as const,
          Source: v.dockerVolume,
          Target: m.mountPath,
          ReadOnly: v.readOnly || m.readOnly === true,
          // The kubelet never copies image content into a volume; Docker does unless told not to.
          VolumeOptions: { NoCopy: true } as Dockerode.MountSettings['VolumeOptions'],
        };
      }),
      LogConfig: { Type: 'json-file', Config: { 'max-size': String(i.logMaxBytes), 'max-file': '1' } },
      ...(sandbox.runtime === undefined ? {} : { Runtime: sandbox.runtime }),
    },
  };
}

/** The error the kubelet reports (CreateContainerConfigError) when runAsNonRoot cannot hold; undefined when it does. */
export function nonRootViolation(sc: SecurityContext, imageUser: string, pod: string, c: string): string | undefined {
  if (sc.runAsNonRoot !== true) return undefined;
  const uid = sc.runAsUser ?? (imageUser === '' ? 0 : imageUser.split(':')[0]);
  if (typeof uid === 'string' && !/^\d+$/.test(uid)) {
    return (
      `container has runAsNonRoot and image has non-numeric user (${uid}), cannot verify user is non-root ` +
      `(pod: "${pod}", container: ${c})`
    );
  }
  return Number(uid) === 0
    ? `container has runAsNonRoot and image will run as root (pod: "${pod}", container: ${c})`
    : undefined;
}
