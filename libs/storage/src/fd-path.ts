import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';

/*
 * Everything under a session directory may be rewritten by hostile code at any moment, so no path string that
 * crosses more than one untrusted component is ever handed to the kernel. Instead we hold a directory fd and name
 * one child at a time through /proc/self/fd/<fd>/<name>: the kernel resolves the magic link to exactly the directory
 * we opened, and O_NOFOLLOW (or the no-follow semantics of lstat/unlink/rmdir/rename/link) covers the one name
 * after it.
 */

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;

/** O_NONBLOCK so that a FIFO or device planted where a directory was expected can never stall the open. */
export const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK;

/** A path naming `name` inside the directory open as `dir` (or the directory itself when `name` is omitted). */
export function at(dir: FileHandle, name?: string): string {
  return name === undefined ? `/proc/self/fd/${dir.fd}` : `/proc/self/fd/${dir.fd}/${name}`;
}

export function errno(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'string' ? e.code : undefined;
}

/** Errors meaning "what you named is not there as the kind of thing you expected". */
export const NOT_THERE = new Set([
  'ENOENT',
  'ELOOP',
  'ENOTDIR',
  'EISDIR',
  'ENXIO',
  'ENODEV',
  'EACCES',
  'EPERM',
  'ENAMETOOLONG',
]);

/** Opens the trusted root itself (configured by the operator, so a symlink there is deliberate and followed). */
export function openRoot(root: string): Promise<FileHandle> {
  return open(root, O_RDONLY | O_DIRECTORY);
}

/** Opens a child directory without following a symlink in its place. */
export function openChildDir(dir: FileHandle, name: string): Promise<FileHandle> {
  return open(at(dir, name), DIR_FLAGS);
}

/**
 * Walks `segments` down from `root`, one no-follow open per component, closing each parent fd as soon as the child
 * is open. Returns the fd of the last directory; the caller closes it. Errors from open() propagate unchanged.
 */
export async function openDirPath(root: string, segments: readonly string[]): Promise<FileHandle> {
  let dir = await openRoot(root);
  try {
    for (const segment of segments) {
      const parent = dir;
      dir = await openChildDir(parent, segment);
      await parent.close();
    }
    return dir;
  } catch (e) {
    await dir.close().catch(() => undefined);
    throw e;
  }
}

/**
 * Like `at`, for a raw name from readdir({ encoding: 'buffer' }): a name that is not valid UTF-8 would be mangled by
 * decoding, so operations that must reach every entry (removal) keep it as bytes.
 */
export function atRaw(dir: FileHandle, name: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`/proc/self/fd/${dir.fd}/`), name]);
}
