import { constants } from 'node:fs';
import {
  copyFile,
  lchown,
  lstat,
  lutimes,
  mkdir,
  open,
  opendir,
  readlink,
  symlink,
  type FileHandle,
} from 'node:fs/promises';
import { join } from 'node:path';
import { DIR_FLAGS, at, errno } from './fd-path.ts';

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = constants;
/** As deep as a client path can go, and some: deeper directories are left out of the copy. */
const MAX_DEPTH = 64;

export interface CopyTreeOptions {
  /** Stop (throwing) past this many bytes of regular files: a copy is bounded like what it copies. */
  maxBytes?: number;
}

/**
 * Copies the tree at `from` to `to` (which must not exist) where no subvolume snapshot can: each regular file as a
 * reflink where the filesystem has them (XFS, btrfs: no data copied), else byte for byte; directories, symlinks
 * (recreated as they are, never followed), owners, modes and times kept; anything else (FIFOs, sockets, devices)
 * left out. The source may be written by hostile code meanwhile: every entry is opened below a directory fd without
 * following, and a file is copied from the fd it was checked through. Answers the bytes of the files copied.
 */
export async function copyTree(from: string, to: string, { maxBytes = Infinity }: CopyTreeOptions = {}) {
  const root = await open(from, DIR_FLAGS);
  const budget = { bytes: 0, maxBytes };
  try {
    await copyDir(root, to, 0, budget, true);
  } finally {
    await root.close();
  }
  return budget.bytes;
}

interface Budget {
  bytes: number;
  maxBytes: number;
}

async function copyDir(dir: FileHandle, to: string, depth: number, budget: Budget, top = false) {
  const st = await dir.stat();
  await mkdir(to, { mode: 0o700, recursive: false }).catch((e: unknown) => {
    if (!top || errno(e) !== 'EEXIST') throw e;
  });
  for await (const entry of await opendir(at(dir))) {
    const target = join(to, entry.name);
    if (entry.isDirectory()) {
      if (depth >= MAX_DEPTH) continue;
      const child = await open(at(dir, entry.name), DIR_FLAGS).catch((e: unknown) => {
        if (errno(e) === 'ENOENT' || errno(e) === 'ELOOP' || errno(e) === 'ENOTDIR') return undefined;
        throw e;
      });
      if (child === undefined) continue;
      try {
        await copyDir(child, target, depth + 1, budget);
      } finally {
        await child.close();
      }
    } else if (entry.isSymbolicLink()) {
      const [link, lst] = await Promise.all([readlink(at(dir, entry.name)), lstat(at(dir, entry.name))]).catch(
        () => [undefined, undefined] as const,
      );
      if (link === undefined || lst === undefined) continue;
      await symlink(link, target);
      await lchown(target, lst.uid, lst.gid);
    } else if (entry.isFile()) {
      await copyFileAt(dir, entry.name, target, budget);
    }
  }
  await finish(to, st);
}

async function copyFileAt(dir: FileHandle, name: string, target: string, budget: Budget) {
  const file = await open(at(dir, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK).catch((e: unknown) => {
    if (errno(e) === 'ENOENT' || errno(e) === 'ELOOP' || errno(e) === 'ENXIO') return undefined;
    throw e;
  });
  if (file === undefined) return;
  try {
    const st = await file.stat();
    if (!st.isFile()) return;
    budget.bytes += st.size;
    if (budget.bytes > budget.maxBytes) throw new Error(`more than ${budget.maxBytes} bytes to copy`);
    // Through the fd checked above: the name may point elsewhere by now, the fd cannot.
    await copyFile(at(file), target, constants.COPYFILE_FICLONE | constants.COPYFILE_EXCL);
    await finish(target, st);
  } finally {
    await file.close();
  }
}

async function finish(path: string, st: { uid: number; gid: number; mode: number; atime: Date; mtime: Date }) {
  await lchown(path, st.uid, st.gid);
  const handle = await open(path, O_RDONLY | O_NOFOLLOW);
  try {
    await handle.chmod(st.mode & 0o7777 & ~0o6000);
  } finally {
    await handle.close();
  }
  await lutimes(path, st.atime, st.mtime);
}
