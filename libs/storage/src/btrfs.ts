import { constants } from 'node:fs';
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
const VOL_ARGS_BYTES = 4096;
const SUBVOL_RDONLY = 1n << 1n;
const QGROUP_LIMIT_MAX_RFER = 1n;
/** The inode number of every subvolume's root directory. */
export const SUBVOLUME_ROOT_INO = 256;
const NAME_MAX = 255;

const openDir = (path: string): Promise<FileHandle> =>
  open(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);

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
  const parent = await openDir(dirname(path));
  try {
    const args = Buffer.alloc(VOL_ARGS_BYTES);
    args.write(nameOf(path), 8, 'utf8');
    await ioctl(`deleting the subvolume ${path}`, parent.fd, SNAP_DESTROY, args);
  } finally {
    await parent.close();
  }
}

/** Limits the bytes the subvolume at `path` may refer to (its qgroup's max_rfer), as `btrfs qgroup limit` does. */
export async function limitSubvolume(path: string, bytes: number): Promise<void> {
  const handle = await openDir(path);
  try {
    const args = Buffer.alloc(48);
    args.writeBigUInt64LE(0n, 0); // qgroupid 0: the subvolume of the fd
    args.writeBigUInt64LE(QGROUP_LIMIT_MAX_RFER, 8);
    args.writeBigUInt64LE(BigInt(bytes), 16);
    await ioctl(`limiting ${path} to ${bytes} bytes`, handle.fd, QGROUP_LIMIT, args);
  } finally {
    await handle.close();
  }
}
