import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { chmod, chown, lstat, mkdir, readdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import { dockerName, podLabels, type PodRef } from './docker-labels.ts';
import type { Volume } from './pod-types.ts';
import { parseQuantity } from './quantity.ts';

const execFileAsync = promisify(execFile);

/** A volume of a running Pod: the Docker volume behind it and what the kubelet must watch. */
export interface PodVolume {
  name: string;
  dockerVolume: string;
  /** Host path of the volume's contents (the engine is local), for usage and for writing Secret files. */
  hostPath: string;
  readOnly: boolean;
  /** A memory-backed emptyDir: a tmpfs mounted on hostPath, unmounted before the volume is removed. */
  tmpfs?: boolean;
  /** Disk-backed emptyDir with a sizeLimit: the eviction manager measures it. */
  evictAbove?: { bytes: number; quantity: string };
}

/** Files of a Secret volume or the service-account token: relative path → bytes and mode. */
export type VolumeFiles = Map<string, { data: Buffer; mode: number }>;

/**
 * An emptyDir as a Docker volume shared by all of the Pod's containers: disk-backed (sizeLimit enforced by the
 * eviction manager), or `medium: Memory` as a tmpfs of sizeLimit bytes, whose pages count against the writer's
 * memory cgroup as on a node. Writable by any uid (0777), as the kubelet makes it; fsGroup owns it when set.
 */
export async function createEmptyDir(
  docker: Dockerode,
  ref: PodRef,
  v: Volume,
  fsGroup: number | undefined,
): Promise<PodVolume> {
  const memory = v.emptyDir?.medium === 'Memory';
  const limit = v.emptyDir?.sizeLimit;
  const bytes = limit === undefined ? undefined : Math.floor(parseQuantity(limit));
  const volume = dockerName(ref, `vol-${v.name}`);
  await docker.createVolume({ Name: volume, Labels: podLabels(ref) });
  const hostPath = (await docker.getVolume(volume).inspect()).Mountpoint;
  if (memory) {
    // The kubelet mounts a tmpfs for the Pod's whole life. A Docker tmpfs volume would be unmounted (and emptied)
    // whenever no container uses it, e.g. between an init container and the app containers: mount one here instead.
    await execFileAsync('mount', ['-t', 'tmpfs', '-o', `size=${bytes ?? 64 << 20},mode=1777`, 'tmpfs', hostPath]);
  }
  if (fsGroup !== undefined) await chown(hostPath, 0, fsGroup);
  await chmod(hostPath, fsGroup === undefined ? (memory ? 0o1777 : 0o777) : 0o2777);
  return {
    name: v.name,
    dockerVolume: volume,
    hostPath,
    readOnly: false,
    ...(memory ? { tmpfs: true } : {}),
    ...(!memory && bytes !== undefined ? { evictAbove: { bytes, quantity: String(limit) } } : {}),
  };
}

/**
 * A Secret (or token) volume laid out as the kubelet's atomic writer does: the files in a timestamped
 * `..<time>` directory, `..data` → that directory, and each top-level name a symlink through `..data`. A reader
 * that refuses symlinks (O_NOFOLLOW) fails here exactly as on a node. Mounted read-only.
 */
export async function createFilesVolume(
  docker: Dockerode,
  ref: PodRef,
  name: string,
  files: VolumeFiles,
  fsGroup: number | undefined,
): Promise<PodVolume> {
  const volume = dockerName(ref, `vol-${name}`);
  await docker.createVolume({ Name: volume, Labels: podLabels(ref) });
  const hostPath = (await docker.getVolume(volume).inspect()).Mountpoint;
  const stamp = `..${new Date().toISOString().replace(/[-:]/g, '_').replace('T', '_').replace('Z', '')}`;
  await mkdir(join(hostPath, stamp), { mode: 0o755 });
  const tops = new Set<string>();
  for (const [path, { data, mode }] of files) {
    const file = join(hostPath, stamp, path);
    await mkdir(join(file, '..'), { recursive: true, mode: 0o755 });
    await writeFile(file, data, { mode });
    await chmod(file, fsGroup === undefined ? mode : mode | 0o040);
    if (fsGroup !== undefined) await chown(file, 0, fsGroup);
    tops.add(path.split('/')[0]!);
  }
  await symlink(stamp, join(hostPath, '..data'));
  for (const top of tops) await symlink(join('..data', top), join(hostPath, top));
  await chmod(hostPath, 0o1777);
  return { name, dockerVolume: volume, hostPath, readOnly: true };
}

/** Bytes a directory tree takes on disk (allocated blocks, as `du` counts), symlinks not followed. */
export async function diskUsage(dir: string): Promise<number> {
  let total = 0;
  const walk = async (path: string): Promise<void> => {
    const st = await lstat(path).catch(() => undefined);
    if (!st) return;
    total += st.blocks * 512;
    if (!st.isDirectory()) return;
    const names = await readdir(path).catch(() => [] as string[]);
    for (const n of names) await walk(join(path, n));
  };
  await walk(dir);
  return total;
}

/** Removes a Pod's volume, unmounting its tmpfs first (a mounted directory cannot be removed). */
export async function removePodVolume(docker: Dockerode, v: { dockerVolume: string; hostPath: string }): Promise<void> {
  await unmountTmpfs(v.hostPath);
  await docker
    .getVolume(v.dockerVolume)
    .remove({ force: true })
    .catch(() => {});
}

/** Unmounts whatever is mounted on `path` (lazily: a container still exiting may hold it); nothing mounted is fine. */
export async function unmountTmpfs(path: string): Promise<void> {
  await execFileAsync('umount', ['-l', path]).catch(() => {});
}
