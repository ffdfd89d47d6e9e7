import { constants, readFileSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { ioctl } from './libc.ts';

/*
 * The btrfs calls that sessions' snapshots, forks and undo steps make, as ioctls (libc.ts): a snapshot is one call,
 * with no process spawned and no blocked event loop (it waits on the thread pool for a transaction commit).
 */

/** _IOW(BTRFS_IOCTL_MAGIC, 23, struct btrfs_ioctl_vol_args_v2): a snapshot of the subvolume `fd`, named `name`. */
const SNAP_CREATE_V2 = 0x50009417;
/** _IOW(BTRFS_IOCTL_MAGIC, 15, struct btrfs_ioctl_vol_args): deletes the subvolume `name` of the directory. */
const SNAP_DESTROY = 0x5000940f;
/** _IOR(BTRFS_IOCTL_MAGIC, 43, struct btrfs_ioctl_qgroup_limit_args): the limits of a qgroup (0: the fd's). */
const QGROUP_LIMIT = 0x8030942b;
/** _IOW(BTRFS_IOCTL_MAGIC, 14, struct btrfs_ioctl_vol_args): a new empty subvolume `name` in the directory. */
const SUBVOL_CREATE = 0x5000940e;
/** _IOWR(BTRFS_IOCTL_MAGIC, 18, struct btrfs_ioctl_ino_lookup_args): with treeid 0, answers the fd's subvolume id. */
const INO_LOOKUP = 0xd0009412;
/** _IOW(BTRFS_IOCTL_MAGIC, 42, struct btrfs_ioctl_qgroup_create_args): creates (create 1) or destroys a qgroup. */
const QGROUP_CREATE = 0x4010942a;
/** _IOR(BTRFS_IOCTL_MAGIC, 31, struct btrfs_ioctl_fs_info_args): the filesystem's fsid, among others. */
const FS_INFO = 0x8400941f;
const FS_INFO_BYTES = 1024;
const INO_LOOKUP_BYTES = 4096;
const VOL_ARGS_BYTES = 4096;
const SUBVOL_RDONLY = 1n << 1n;
const QGROUP_LIMIT_MAX_RFER = 1n;
/** The inode number of every subvolume's root directory. */
export const SUBVOLUME_ROOT_INO = 256;
const NAME_MAX = 255;

const openDir = (path: string): Promise<FileHandle> =>
  open(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);

/** The ioctl `request` on the directory `dir` (opened for it, closed after), with `args`, which the kernel may fill. */
async function dirIoctl(dir: string, what: string, request: number, args: Buffer): Promise<void> {
  const handle = await openDir(dir);
  try {
    await ioctl(what, handle.fd, request, args);
  } finally {
    await handle.close();
  }
}

function nameOf(path: string): string {
  const name = basename(path);
  if (Buffer.byteLength(name) > NAME_MAX || name === '.' || name === '..' || name === '') {
    throw new Error(`${path}: not a name a subvolume can have`);
  }
  return name;
}

/**
 * Makes `target` (which must not exist, in a directory on the same btrfs filesystem) a snapshot of the subvolume
 * `source`: it shares every extent and copies none. `readOnly` makes it immutable (undo steps, named snapshots).
 */
export async function snapshotSubvolume(source: string, target: string, { readOnly = false } = {}): Promise<void> {
  const name = nameOf(target);
  const [from, parent] = await Promise.all([openDir(source), openDir(dirname(target))]);
  try {
    const args = Buffer.alloc(VOL_ARGS_BYTES);
    args.writeBigInt64LE(BigInt(from.fd), 0);
    args.writeBigUInt64LE(readOnly ? SUBVOL_RDONLY : 0n, 16);
    args.write(name, 56, 'utf8');
    await ioctl(`snapshot of ${source} at ${target}`, parent.fd, SNAP_CREATE_V2, args);
  } finally {
    await Promise.all([from.close(), parent.close()]);
  }
}

/**
 * Deletes the subvolume at `path`, read-only or not, whatever it holds: the kernel drops its extents in the
 * background (and, on recent kernels, its qgroup once they are gone).
 */
export async function deleteSubvolume(path: string): Promise<void> {
  const args = Buffer.alloc(VOL_ARGS_BYTES);
  args.write(nameOf(path), 8, 'utf8');
  await dirIoctl(dirname(path), `deleting the subvolume ${path}`, SNAP_DESTROY, args);
}

/** Limits the bytes the subvolume at `path` may refer to (its qgroup's max_rfer), as `btrfs qgroup limit` does. */
export async function limitSubvolume(path: string, bytes: number): Promise<void> {
  const args = Buffer.alloc(48);
  args.writeBigUInt64LE(0n, 0); // qgroupid 0: the subvolume of the fd
  args.writeBigUInt64LE(QGROUP_LIMIT_MAX_RFER, 8);
  args.writeBigUInt64LE(BigInt(bytes), 16);
  await dirIoctl(path, `limiting ${path} to ${bytes} bytes`, QGROUP_LIMIT, args);
}

/** Makes `path` (which must not exist, in a directory on btrfs) a new empty subvolume, as `btrfs subvolume create`. */
export async function createSubvolume(path: string): Promise<void> {
  const args = Buffer.alloc(VOL_ARGS_BYTES);
  args.write(nameOf(path), 8, 'utf8');
  await dirIoctl(dirname(path), `creating the subvolume ${path}`, SUBVOL_CREATE, args);
}

/** The id of the subvolume `path` is in (its qgroup is 0/<id>), as `btrfs inspect-internal rootid`. */
export async function subvolumeId(path: string): Promise<bigint> {
  const args = Buffer.alloc(INO_LOOKUP_BYTES);
  // treeid 0: the fd's own tree, which the kernel writes back; the objectid of a subvolume's root asks for no path.
  args.writeBigUInt64LE(BigInt(SUBVOLUME_ROOT_INO), 8);
  await dirIoctl(path, `the subvolume id of ${path}`, INO_LOOKUP, args);
  return args.readBigUInt64LE(0);
}

/** Destroys the qgroup 0/`id` of the filesystem `onFs` is on, as `btrfs qgroup destroy` (EBUSY while it counts). */
export async function destroyQgroup(onFs: string, id: bigint): Promise<void> {
  const args = Buffer.alloc(16);
  args.writeBigUInt64LE(0n, 0); // create 0: destroy
  args.writeBigUInt64LE(id, 8); // level 0
  await dirIoctl(onFs, `destroying the qgroup 0/${id}`, QGROUP_CREATE, args);
}

/** The filesystem's uuid (its fsid), which names it under /sys/fs/btrfs. */
export async function filesystemId(path: string): Promise<string> {
  const args = Buffer.alloc(FS_INFO_BYTES);
  await dirIoctl(path, `the filesystem id of ${path}`, FS_INFO, args);
  const hex = args.subarray(16, 32).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Where the kernel shows the qgroups of a filesystem (Linux 5.9 and later, once quotas are enabled). */
export const qgroupsDir = (fsid: string): string => `/sys/fs/btrfs/${fsid}/qgroups`;

/**
 * The bytes the qgroup 0/`id` refers to and its limit (Infinity: none), read from sysfs: the figures `btrfs qgroup
 * show` reads from the quota tree, without a process. Rejects (ENOENT) when there is no such qgroup.
 */
export async function qgroupUsage(fsid: string, id: bigint): Promise<{ used: number; limit: number }> {
  const dir = `${qgroupsDir(fsid)}/0_${id}`;
  // Read at once: a sysfs file is a few bytes the kernel formats from memory, so reading it never waits on a disk,
  // and the thread pool (where each async read would queue behind file work) is not worth the hops.
  const read = (name: string): number => Number(readFileSync(`${dir}/${name}`, 'utf8').trim());
  const [used, flags, limit] = [read('referenced'), read('limit_flags'), read('max_referenced')];
  return { used, limit: (BigInt(flags) & QGROUP_LIMIT_MAX_RFER) !== 0n ? limit : Number.POSITIVE_INFINITY };
}
